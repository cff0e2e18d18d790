//! Running core futures for Python's blocking API (GIL released, Ctrl-C
//! aware) on the core's one internal runtime, and [`Deferred`], a result
//! made into a Python object only once the GIL is held. The asyncio API is
//! in `asyncio.rs`.

use std::future::Future;
use std::sync::OnceLock;
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::time::Duration;

use pyo3::prelude::*;

use crate::errors::core_error;

/// How often a waiting call on the main thread takes the GIL back to run
/// signal handlers (Ctrl-C). Other threads never receive signals in Python,
/// so they wait without slicing.
const SIGNAL_SLICE: Duration = Duration::from_millis(20);

/// The thread identity of Python's main thread, recorded at import.
static MAIN_THREAD: OnceLock<u64> = OnceLock::new();

/// Records which thread is Python's main thread (the one that runs signal handlers).
pub(crate) fn record_main_thread(py: Python<'_>) -> PyResult<()> {
    let ident: u64 = py
        .import("threading")?
        .call_method0("main_thread")?
        .getattr("ident")?
        .extract()?;
    let _ = MAIN_THREAD.set(ident);
    Ok(())
}

fn on_main_thread() -> bool {
    // SAFETY: a plain query of the calling thread's identity; no preconditions.
    let current = unsafe { pyo3::ffi::PyThread_get_thread_ident() } as u64;
    MAIN_THREAD.get() == Some(&current)
}

/// The core's runtime handle, or the core's error as a Python exception.
pub(crate) fn handle(py: Python<'_>) -> PyResult<tokio::runtime::Handle> {
    fencelock::runtime_handle().map_err(|e| core_error(py, e))
}

/// Runs `future` on the core's runtime and waits for it with the GIL
/// released. On the main thread a pending signal (Ctrl-C) interrupts the
/// wait: the future is dropped, which cancels the operation cleanly, and the
/// signal handler's exception (KeyboardInterrupt) is raised.
pub(crate) fn wait<F, T>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = sync_channel(1);
    let canceller = fencelock::Canceller::new();
    // Leaving this function by any other way than the answer (Ctrl-C)
    // cancels the operation.
    let _cancel_on_return = canceller.clone().cancel_on_drop();
    handle(py)?.spawn(async move {
        if let Ok(value) = canceller.run(future).await {
            let _ = tx.send(value);
        }
    });
    let sliced = on_main_thread();
    let mut rx = rx;
    loop {
        let (back, got) = py.detach(move || {
            let got = if sliced {
                rx.recv_timeout(SIGNAL_SLICE)
            } else {
                rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
            };
            (rx, got)
        });
        rx = back;
        match got {
            Ok(value) => return Ok(value),
            Err(RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(RecvTimeoutError::Disconnected) => {
                return Err(core_error(
                    py,
                    fencelock::Error::panicked("the fencelock operation (it ended without an answer)"),
                ));
            }
        }
    }
}

/// A value made into a Python object once the GIL is held (when the
/// awaitable completes), so futures never take the GIL on a runtime worker.
pub(crate) struct Deferred(Box<Convert>);

/// Turns a finished operation's result into a Python object (GIL held).
type Convert = dyn for<'py> FnOnce(Python<'py>) -> PyResult<Py<PyAny>> + Send;

impl Deferred {
    /// Runs the conversion (the GIL is held).
    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        (self.0)(py)
    }
}

impl Deferred {
    /// Wraps a conversion to run with the GIL.
    pub(crate) fn new(f: impl for<'py> FnOnce(Python<'py>) -> PyResult<Py<PyAny>> + Send + 'static) -> Self {
        Deferred(Box::new(f))
    }

    /// A core result: the value through `ok`, the error as its exception.
    pub(crate) fn result<T: Send + 'static>(
        result: fencelock::Result<T>,
        ok: impl for<'py> FnOnce(Python<'py>, T) -> PyResult<Py<PyAny>> + Send + 'static,
    ) -> Self {
        Deferred::new(move |py| match result {
            Ok(value) => ok(py, value),
            Err(err) => Err(core_error(py, err)),
        })
    }
}

impl<'py> IntoPyObject<'py> for Deferred {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        (self.0)(py).map(|obj| obj.into_bound(py))
    }
}

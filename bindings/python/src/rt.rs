//! Running core futures for Python: blocking (GIL released, Ctrl-C aware)
//! and as asyncio awaitables, both on the core's one internal runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3_async_runtimes::TaskLocals;
use pyo3_async_runtimes::generic::{ContextExt, JoinError, Runtime};

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

/// Aborts a spawned task when dropped, so an interrupted wait cancels the
/// operation (the core's cleanup guard then undoes partial grants).
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
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
    let _task = AbortOnDrop(handle(py)?.spawn(async move {
        let _ = tx.send(future.await);
    }));
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

/// pyo3-async-runtimes' generic runtime, backed by the core's own tokio
/// runtime (no second runtime; a forked child gets its own through
/// [`fencelock::runtime_handle`]).
pub(crate) struct CoreRuntime;

/// The join error of a task on [`CoreRuntime`].
pub(crate) struct CoreJoinError(tokio::task::JoinError);

impl JoinError for CoreJoinError {
    fn is_panic(&self) -> bool {
        self.0.is_panic()
    }

    fn into_panic(self) -> Box<dyn std::any::Any + Send + 'static> {
        self.0.into_panic()
    }
}

/// The join handle of a task on [`CoreRuntime`].
pub(crate) struct CoreJoinHandle(Option<tokio::task::JoinHandle<()>>);

impl Future for CoreJoinHandle {
    type Output = Result<(), CoreJoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        match self.0.as_mut() {
            // The runtime could not be started: nothing ran, nothing to report.
            None => std::task::Poll::Ready(Ok(())),
            Some(handle) => Pin::new(handle).poll(cx).map(|r| r.map_err(CoreJoinError)),
        }
    }
}

tokio::task_local! {
    static TASK_LOCALS: std::cell::OnceCell<TaskLocals>;
}

impl Runtime for CoreRuntime {
    type JoinError = CoreJoinError;
    type JoinHandle = CoreJoinHandle;

    fn spawn<F>(fut: F) -> Self::JoinHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        // `handle()` was checked before the awaitable was made; it only fails
        // when the runtime's threads cannot start.
        CoreJoinHandle(fencelock::runtime_handle().ok().map(|h| h.spawn(fut)))
    }

    fn spawn_blocking<F>(f: F) -> Self::JoinHandle
    where
        F: FnOnce() + Send + 'static,
    {
        CoreJoinHandle(fencelock::runtime_handle().ok().map(|h| h.spawn_blocking(f)))
    }
}

impl ContextExt for CoreRuntime {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        let cell = std::cell::OnceCell::new();
        let _ = cell.set(locals);
        Box::pin(TASK_LOCALS.scope(cell, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        TASK_LOCALS.try_with(|c| c.get().cloned()).unwrap_or_default()
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

/// Makes a coroutine of `future`, run on the core's runtime (see
/// [`crate::coroutine`]). Cancelling the awaiting task drops `future`, which
/// cancels the operation.
pub(crate) fn awaitable<'py, F>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Deferred> + Send + 'static,
{
    #[cfg(unix)]
    let asyncio_future = crate::bridge::awaitable(py, future)?;
    #[cfg(not(unix))]
    let asyncio_future = generic_awaitable(py, future)?;
    Ok(Bound::new(py, crate::coroutine::Operation::new(asyncio_future))?.into_any())
}

/// The portable path: pyo3-async-runtimes' generic bridge on the core's
/// runtime (each completion takes the GIL on a blocking thread).
#[cfg_attr(unix, allow(dead_code))]
pub(crate) fn generic_awaitable<'py, F>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Deferred> + Send + 'static,
{
    handle(py)?;
    pyo3_async_runtimes::generic::future_into_py::<CoreRuntime, _, _>(py, async move { Ok(future.await) })
}

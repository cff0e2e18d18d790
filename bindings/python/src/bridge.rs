//! A lean asyncio bridge (Unix): completions never take the GIL on a
//! runtime thread.
//!
//! Each event loop gets one [`Completer`]: a non-blocking pipe whose read
//! end the loop watches (`loop.add_reader`) and a queue of finished
//! operations. A core future runs on the core's runtime; when it finishes,
//! its result is queued and (if the queue was empty) one byte is written to
//! the pipe. The loop then drains the whole queue in one callback, setting
//! the asyncio futures' results with the GIL it already holds. Many
//! concurrent operations thus cost one wake-up, and runtime threads never
//! wait for the GIL (which the busy loop thread may hold for milliseconds).

use std::cell::RefCell;
use std::future::Future;
use std::os::fd::RawFd;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::rt::{Deferred, handle};

/// Finished operations of one event loop, and the pipe that wakes it.
#[pyclass(module = "fencelock._native", frozen)]
pub struct Completer {
    read_fd: RawFd,
    write_fd: RawFd,
    queue: Mutex<Vec<(Py<PyAny>, Deferred)>>,
}

impl Completer {
    fn new() -> PyResult<Self> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a valid array of two ints for pipe() to fill.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        for fd in fds {
            // SAFETY: fcntl on descriptors we just created and own.
            unsafe {
                let flags = libc::fcntl(fd, libc::F_GETFL);
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        Ok(Completer {
            read_fd: fds[0],
            write_fd: fds[1],
            queue: Mutex::new(Vec::new()),
        })
    }

    /// Queues a result for `future` and wakes the loop if it may be asleep.
    fn complete(&self, future: Py<PyAny>, value: Deferred) {
        let first = {
            let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            queue.push((future, value));
            queue.len() == 1
        };
        if first {
            // SAFETY: writing one byte from a valid buffer to our own pipe.
            // A full pipe (EAGAIN) already holds a pending wake-up.
            unsafe {
                libc::write(self.write_fd, [1u8].as_ptr().cast(), 1);
            }
        }
    }
}

#[pymethods]
impl Completer {
    /// The loop's reader callback: sets the results of every finished operation.
    fn _drain(&self, py: Python<'_>) -> PyResult<()> {
        // Empty the pipe first, then the queue: a result queued after the
        // queue is taken writes a fresh byte, so it is never stranded.
        let mut buf = [0u8; 256];
        // SAFETY: reading into a valid buffer of the given length from our own pipe.
        while unsafe { libc::read(self.read_fd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
        let done = std::mem::take(&mut *self.queue.lock().unwrap_or_else(|p| p.into_inner()));
        for (future, value) in done {
            let future = future.bind(py);
            if future.call_method0(pyo3::intern!(py, "done"))?.is_truthy()? {
                continue; // cancelled meanwhile
            }
            match value.into_py(py) {
                Ok(result) => future.call_method1(pyo3::intern!(py, "set_result"), (result,))?,
                Err(err) => future.call_method1(pyo3::intern!(py, "set_exception"), (err.into_value(py),))?,
            };
        }
        Ok(())
    }
}

impl Drop for Completer {
    fn drop(&mut self) {
        // SAFETY: closing the descriptors this completer owns, once.
        unsafe {
            libc::close(self.read_fd);
            libc::close(self.write_fd);
        }
    }
}

/// Cancels the operation when its asyncio future is cancelled.
#[pyclass(module = "fencelock._native", frozen)]
pub struct CancelGuard {
    canceller: fencelock::Canceller,
}

#[pymethods]
impl CancelGuard {
    fn __call__(&self, future: &Bound<'_, PyAny>) -> PyResult<()> {
        if future
            .call_method0(pyo3::intern!(future.py(), "cancelled"))?
            .is_truthy()?
        {
            self.canceller.cancel();
        }
        Ok(())
    }
}

thread_local! {
    /// The completer of the loop that last ran on this thread.
    static CURRENT: RefCell<Option<(Py<PyAny>, Py<Completer>)>> = const { RefCell::new(None) };
}

static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The running loop and its completer (registering one on first use).
fn completer_for<'py>(py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Py<Completer>)> {
    let get_loop = GET_RUNNING_LOOP.get_or_try_init(py, || {
        py.import("asyncio")?
            .getattr("get_running_loop")
            .map(Bound::unbind)
    })?;
    let event_loop = get_loop.bind(py).call0()?;
    let cached = CURRENT.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|(l, _)| l.bind(py).is(&event_loop))
            .map(|(_, completer)| completer.clone_ref(py))
    });
    if let Some(completer) = cached {
        return Ok((event_loop, completer));
    }
    let completer = Py::new(py, Completer::new()?)?;
    let drain = completer.bind(py).getattr("_drain")?;
    event_loop.call_method1("add_reader", (completer.get().read_fd, drain))?;
    CURRENT.with(|c| {
        *c.borrow_mut() = Some((event_loop.clone().unbind(), completer.clone_ref(py)));
    });
    Ok((event_loop, completer))
}

/// An asyncio future for `future`, which runs on the core's runtime.
pub(crate) fn awaitable<'py, F>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Deferred> + Send + 'static,
{
    let (event_loop, completer) = completer_for(py)?;
    let py_future = event_loop.call_method0(pyo3::intern!(py, "create_future"))?;
    let target = py_future.clone().unbind();
    let canceller = fencelock::Canceller::new();
    let cancelled = canceller.clone();
    handle(py)?.spawn(async move {
        // Cancelled: the asyncio future is cancelled already; nothing to set.
        if let Ok(value) = cancelled.run(future).await {
            completer.get().complete(target, value);
        }
    });
    py_future.call_method1(
        pyo3::intern!(py, "add_done_callback"),
        (CancelGuard { canceller },),
    )?;
    Ok(py_future)
}

//! How the asyncio API runs a core future: the one place that explains
//! Python's async bridge.
//!
//! Every async method returns an [`Operation`] (`coroutine.rs`): a coroutine
//! over an asyncio future, so `asyncio.create_task`, `TaskGroup`,
//! `wait_for`, `gather` and `asyncio.timeout` all accept it. The core future
//! starts at once on the core's runtime (no second runtime); its result is a
//! [`Deferred`], made into a Python object only on the loop's thread.
//!
//! On Unix the asyncio future is completed by `bridge.rs`: one pipe per
//! event loop, watched with `loop.add_reader`, and a queue of finished
//! operations the loop drains in one callback with the GIL it holds. That
//! replaces the stock path, pyo3-async-runtimes' `future_into_py`, in which
//! every completion takes the GIL on a runtime thread (which the busy loop
//! may hold for milliseconds) and calls `loop.call_soon_threadsafe`, one
//! wake-up per operation. The stock path remains the portable fallback
//! ([`generic_awaitable`], elsewhere than Unix), run on the core's runtime
//! through [`CoreRuntime`]. Cancelling the awaiting task cancels the
//! operation through the core's `Canceller`. Measurements:
//! `docs/performance.md`.

use std::future::Future;
use std::pin::Pin;

use pyo3::prelude::*;
use pyo3_async_runtimes::TaskLocals;
use pyo3_async_runtimes::generic::{ContextExt, JoinError, Runtime};

#[cfg(unix)]
use crate::bridge;
use crate::coroutine::Operation;
use crate::rt::{Deferred, handle};

/// Makes a coroutine of `future`, run on the core's runtime (see
/// [`crate::coroutine`]). Cancelling the awaiting task drops `future`, which
/// cancels the operation.
pub(crate) fn awaitable<'py, F>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Deferred> + Send + 'static,
{
    #[cfg(unix)]
    let asyncio_future = bridge::awaitable(py, future)?;
    #[cfg(not(unix))]
    let asyncio_future = generic_awaitable(py, future)?;
    Ok(Bound::new(py, Operation::new(asyncio_future))?.into_any())
}

/// An awaitable that resolves at once to `value`: what an `__aenter__`
/// returning its own object hands out.
pub(crate) fn ready<'py>(py: Python<'py>, value: Py<PyAny>) -> PyResult<Bound<'py, PyAny>> {
    awaitable(py, async move { Deferred::new(move |_| Ok(value)) })
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

//! `Lock` (sync), `AsyncLock` (asyncio), their shared base `LockBase`, and
//! their `LostSignal`. The leaderships of `election.rs` derive from
//! `LockBase` too.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::pyclass_init::PyClassInitializer;
use pyo3::types::PyType;

use fencelock::LockStatus;

use crate::args::{Scope, opt_seconds, seconds};
use crate::asyncio;
use crate::fence::Fence;
use crate::rt::{self, Deferred};

/// What `Lock`, `AsyncLock` and `LostSignal` share: the core lock and the
/// task that calls `on_lost`.
pub(crate) struct LockInner {
    pub(crate) lock: fencelock::Lock,
    /// Stops the `on_lost` watcher on release and when the handle goes away.
    watcher: Mutex<Option<fencelock::CancelOnDrop>>,
}

impl LockInner {
    /// Wraps a fresh core lock, starting the `on_lost` watcher if a callback is given.
    pub(crate) fn new(lock: fencelock::Lock, on_lost: Option<Py<PyAny>>) -> Arc<Self> {
        let watcher = on_lost.and_then(|callback| {
            let lost = lock.lost_task();
            let resource = lock.resource().to_owned();
            let handle = fencelock::runtime_handle().ok()?;
            let canceller = fencelock::Canceller::new();
            let (watch, runtime) = (canceller.clone(), handle.clone());
            let watching = async move {
                let reason = lost.await;
                // Python runs on a blocking thread, never on a runtime worker.
                let _ = handle
                    .spawn_blocking(move || {
                        Python::attach(|py| {
                            if let Err(err) = callback.bind(py).call1((resource, reason.name())) {
                                err.write_unraisable(py, Some(callback.bind(py)));
                            }
                        });
                    })
                    .await;
            };
            runtime.spawn(async move { watch.run(watching).await });
            Some(canceller.cancel_on_drop())
        });
        Arc::new(LockInner {
            lock,
            watcher: Mutex::new(watcher),
        })
    }

    fn stop_watcher(&self) {
        self.watcher
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
    }

    fn status(&self) -> &'static str {
        match self.lock.status() {
            LockStatus::Held => "held",
            LockStatus::Released => "released",
            _ => "lost",
        }
    }

    fn lost_reason(&self) -> Option<&'static str> {
        match self.lock.status() {
            LockStatus::Lost(reason) => Some(reason.name()),
            _ => None,
        }
    }

    fn repr(&self, class: &str) -> String {
        let permit = match self.lock.permit() {
            Some(permit) => format!(" permit={permit}"),
            None => String::new(),
        };
        format!(
            "<fencelock.{class} resource={:?}{permit} fencing_token={} status={} remaining={:.3}s>",
            self.lock.resource(),
            self.lock.fencing_token(),
            self.status(),
            self.lock.remaining().as_secs_f64()
        )
    }

    fn release_task(
        self: &Arc<Self>,
    ) -> impl std::future::Future<Output = fencelock::Result<()>> + Send + 'static {
        self.stop_watcher();
        self.lock.release_task()
    }
}

fn none(py: Python<'_>) -> PyResult<Py<PyAny>> {
    Ok(py.None())
}

/// What `Lock` and `AsyncLock` share: their state and everything that only
/// reads it. The private Python base class `_LockBase` of both (and, through
/// `_LeadershipBase`, of the leaderships); each adds its own `extend`,
/// `release` and (async) context manager.
#[pyclass(name = "_LockBase", module = "fencelock", subclass, frozen)]
pub struct LockBase {
    inner: Arc<LockInner>,
    lost: Py<LostSignal>,
}

impl LockBase {
    /// The base part of a new `Lock`, `AsyncLock`, `Leadership` or `AsyncLeadership`.
    pub(crate) fn init(py: Python<'_>, inner: Arc<LockInner>) -> PyResult<PyClassInitializer<Self>> {
        let lost = Py::new(py, LostSignal { inner: inner.clone() })?;
        Ok(PyClassInitializer::from(LockBase { inner, lost }))
    }

    /// The core lock (for the leadership classes, which read it under other names).
    pub(crate) fn core_lock(&self) -> &fencelock::Lock {
        &self.inner.lock
    }

    /// Releases, waiting with the GIL released (`release`, `resign`, `with`).
    pub(crate) fn release_blocking(&self, py: Python<'_>) -> PyResult<()> {
        let task = self.inner.release_task();
        rt::wait(py, task)?.map_err(|e| crate::errors::core_error(py, e))
    }

    /// What leaving a `with` block does: releases, and raises a release
    /// error only when the block itself raised nothing (its exception wins).
    pub(crate) fn release_on_exit(&self, py: Python<'_>, block_raised: bool) -> PyResult<bool> {
        let result = self.release_blocking(py);
        if !block_raised {
            result?;
        }
        Ok(false)
    }

    /// Releases, in the background, a lock nobody received (its acquire's
    /// task was cancelled after the grant came back); `settle` waits for it.
    pub(crate) fn release_unclaimed(&self) {
        self.inner.stop_watcher();
        self.inner.lock.release_in_background();
    }

    /// An awaitable release (`release`, `resign`, `async with`); errors are
    /// dropped when `quiet`.
    pub(crate) fn release_awaitable<'py>(&self, py: Python<'py>, quiet: bool) -> PyResult<Bound<'py, PyAny>> {
        let task = self.inner.release_task();
        asyncio::awaitable(py, async move {
            let result = task.await;
            Deferred::new(move |py| match result {
                Err(err) if !quiet => Err(crate::errors::core_error(py, err)),
                _ => Ok(py.None()),
            })
        })
    }
}

#[pymethods]
impl LockBase {
    /// The resource this lock protects.
    #[getter]
    fn resource(&self) -> &str {
        self.inner.lock.resource()
    }

    /// Which permit (0 to `permits - 1`) this lock holds when it is a
    /// semaphore's permit (`resource` is then the semaphore's name); None
    /// for a plain lock.
    #[getter]
    fn permit(&self) -> Option<u32> {
        self.inner.lock.permit()
    }

    /// The fencing token: larger than that of every earlier holder of this
    /// resource. Pass it with every write to the protected storage.
    #[getter]
    fn fencing_token(&self) -> u64 {
        self.inner.lock.fencing_token()
    }

    /// What a fenced write of this holder carries (`client.fenced_set(key,
    /// value, lock.fence)`): the fencing token and this grant's holder id.
    #[getter]
    fn fence(&self) -> Fence {
        Fence(self.inner.lock.fence())
    }

    /// True while the lock is held and its validity has not run out.
    fn is_held(&self) -> bool {
        self.inner.lock.is_held()
    }

    /// Seconds the lock stays valid without another renewal (0.0 when not held).
    #[getter]
    fn remaining(&self) -> f64 {
        self.inner.lock.remaining().as_secs_f64()
    }

    /// `"held"`, `"released"` or `"lost"`.
    #[getter]
    pub(crate) fn status(&self) -> &'static str {
        self.inner.status()
    }

    /// How many times the watchdog has renewed the lock.
    #[getter]
    fn renewals(&self) -> u32 {
        self.inner.lock.renewals()
    }

    /// The lost-lock signal: `lost.is_set()`, `lost.wait(timeout)`; in
    /// asyncio `await lock.lost` or `await lock.lost.wait_async(timeout)`.
    #[getter]
    fn lost(&self, py: Python<'_>) -> Py<LostSignal> {
        self.lost.clone_ref(py)
    }

    /// `<fencelock.Lock ...>` or `<fencelock.AsyncLock ...>`.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let class = slf.get_type().name()?;
        Ok(slf.get().inner.repr(&class.to_cow()?))
    }
}

/// A held lock (from `Client.acquire`). Use it as a context manager to
/// release it at the end of the block.
///
/// Dropping the object without `release()` stops renewal; the key then
/// expires on Redis at its ttl.
#[pyclass(module = "fencelock", extends = LockBase, frozen)]
pub struct Lock;

impl Lock {
    /// Wraps a core lock for the sync API.
    pub(crate) fn create(py: Python<'_>, inner: Arc<LockInner>) -> PyResult<Py<Lock>> {
        Py::new(py, LockBase::init(py, inner)?.add_subclass(Lock))
    }

    /// Releases, for `release`, `__exit__` and `LockContext`.
    pub(crate) fn release_now(slf: &Bound<'_, Self>) -> PyResult<()> {
        slf.as_super().get().release_blocking(slf.py())
    }
}

#[pymethods]
impl Lock {
    /// Sets the lock's ttl to `ttl` seconds from now on a majority of nodes.
    /// Raises `LockLostError` if the lock is gone, `NotHeldError` after release.
    fn extend(slf: &Bound<'_, Self>, ttl: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        let ttl = seconds(ttl, "ttl", false, Scope::Call)?;
        let task = slf.as_super().get().inner.lock.extend_task(ttl);
        rt::wait(py, task)?.map_err(|e| crate::errors::core_error(py, e))
    }

    /// Releases the lock on every node. Raises `NotHeldError` if it had already
    /// expired, been lost, or been released.
    fn release(slf: &Bound<'_, Self>) -> PyResult<()> {
        Self::release_now(slf)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Releases the lock. A release error is raised only when the block
    /// itself finished without an exception.
    fn __exit__(
        slf: &Bound<'_, Self>,
        exc_type: Option<&Bound<'_, PyType>>,
        _exc_value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        slf.as_super().get().release_on_exit(slf.py(), exc_type.is_some())
    }
}

/// A held lock (from `AsyncClient.acquire`); `extend` and `release` are
/// coroutines. Use it with `async with` to release it at the end of the block.
#[pyclass(module = "fencelock", extends = LockBase, frozen)]
pub struct AsyncLock;

impl AsyncLock {
    /// Wraps a core lock for the asyncio API.
    pub(crate) fn create(py: Python<'_>, inner: Arc<LockInner>) -> PyResult<Py<AsyncLock>> {
        Py::new(py, LockBase::init(py, inner)?.add_subclass(AsyncLock))
    }

    /// An awaitable release; errors are dropped when `quiet`.
    pub(crate) fn release_awaitable<'py>(slf: &Bound<'py, Self>, quiet: bool) -> PyResult<Bound<'py, PyAny>> {
        slf.as_super().get().release_awaitable(slf.py(), quiet)
    }
}

#[pymethods]
impl AsyncLock {
    /// Coroutine: sets the lock's ttl to `ttl` seconds from now on a majority of nodes.
    fn extend<'py>(slf: &Bound<'py, Self>, ttl: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let ttl = seconds(ttl, "ttl", false, Scope::Call)?;
        let task = slf.as_super().get().inner.lock.extend_task(ttl);
        asyncio::awaitable(slf.py(), async move {
            Deferred::result(task.await, |py, ()| none(py))
        })
    }

    /// Coroutine: releases the lock on every node.
    fn release<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::release_awaitable(slf, false)
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        asyncio::ready(slf.py(), slf.into_any().unbind())
    }

    /// Releases the lock; a release error is raised only when the block
    /// itself finished without an exception.
    fn __aexit__<'py>(
        slf: &Bound<'py, Self>,
        exc_type: Option<&Bound<'py, PyType>>,
        _exc_value: Option<&Bound<'py, PyAny>>,
        _traceback: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Self::release_awaitable(slf, exc_type.is_some())
    }
}

/// Set when the lock is lost while held (key deleted, taken over, or
/// renewals failing until the validity ran out); never after a clean release.
///
/// Like `threading.Event`: `is_set()`, `wait(timeout)`; and in asyncio
/// `await signal.wait_async(timeout)` or simply `await signal`.
#[pyclass(module = "fencelock", frozen)]
pub struct LostSignal {
    inner: Arc<LockInner>,
}

impl LostSignal {
    fn lost_within(
        &self,
        timeout: Option<Duration>,
    ) -> impl std::future::Future<Output = bool> + Send + 'static {
        let lost = self.inner.lock.lost_task();
        async move {
            match timeout {
                None => {
                    lost.await;
                    true
                }
                Some(t) => tokio::time::timeout(t, lost).await.is_ok(),
            }
        }
    }
}

#[pymethods]
impl LostSignal {
    /// True once the lock has been lost.
    fn is_set(&self) -> bool {
        matches!(self.inner.lock.status(), LockStatus::Lost(_))
    }

    /// Why the lock was lost (`"deleted"`, `"taken_over"`, `"unreachable"`,
    /// `"expired"`), or None while it is not lost.
    #[getter]
    fn reason(&self) -> Option<&'static str> {
        self.inner.lost_reason()
    }

    /// Blocks (GIL released, Ctrl-C interrupts) until the lock is lost or
    /// `timeout` seconds pass; returns whether it was lost.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        if self.is_set() {
            return Ok(true);
        }
        let timeout = opt_seconds(timeout, "timeout", true, Scope::Call)?;
        rt::wait(py, self.lost_within(timeout))
    }

    /// Coroutine: waits until the lock is lost or `timeout` seconds pass;
    /// returns whether it was lost.
    #[pyo3(signature = (timeout=None))]
    fn wait_async<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = opt_seconds(timeout, "timeout", true, Scope::Call)?;
        let wait = self.lost_within(timeout);
        asyncio::awaitable(py, async move {
            let lost = wait.await;
            Deferred::new(move |py| Ok(pyo3::types::PyBool::new(py, lost).to_owned().into_any().unbind()))
        })
    }

    fn __await__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.wait_async(py, None)?.call_method0("__await__")
    }

    fn __repr__(&self) -> String {
        match self.inner.lost_reason() {
            Some(reason) => format!("<fencelock.LostSignal set reason={reason}>"),
            None => "<fencelock.LostSignal not set>".to_owned(),
        }
    }
}

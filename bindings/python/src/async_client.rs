//! `AsyncClient`, the asyncio API, and `AsyncLockContext`, its
//! `async with client.lock(...)` (and the semaphores' `async with
//! sem.permit(...)`, the read-write locks' `async with rw.read(...)` and
//! `async with rw.write(...)`).
//!
//! Every call returns an awaitable driven by the core's runtime (see
//! `asyncio::awaitable`); cancelling the awaiting task cancels the operation.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use crate::args::{
    AcquireArgs, CampaignArgs, PermitArgs, client_builder, permits_arg, resource_arg, text_arg,
};
use crate::asyncio;
use crate::calls::{RwMode, acquire, campaign, inspect_py, try_acquire};
use crate::election::AsyncLeadership;
use crate::errors::core_error;
use crate::fence::fenced_args;
use crate::lock::{AsyncLock, LockInner};
use crate::logs;
use crate::metrics::metrics_py;
use crate::observe::AsyncObservation;
use crate::rt::{self, Deferred};
use crate::rw_lock::{self, AsyncRwLock};
use crate::semaphore::{self, AsyncSemaphore};

/// The asyncio twin of `Client`: the same calls as coroutines, on the same
/// internal runtime. Cancelling the task awaiting `acquire` cancels the
/// attempt and undoes any partial grant.
///
/// The constructor connects (briefly blocking, GIL released, at most
/// `connect_timeout`); `await AsyncClient.connect(...)` does the same
/// without blocking the event loop.
#[pyclass(module = "fencelock", frozen)]
pub struct AsyncClient {
    inner: fencelock::Client,
}

#[pymethods]
impl AsyncClient {
    // The options: `ClientOptionArgs` in args.rs.
    #[new]
    #[pyo3(signature = (nodes, **options))]
    fn new(py: Python<'_>, nodes: &Bound<'_, PyAny>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let builder = client_builder("AsyncClient.__new__()", nodes, options)?;
        logs::sync_level(py);
        let inner = rt::wait(py, builder.build())?.map_err(|e| core_error(py, e))?;
        Ok(AsyncClient { inner })
    }

    /// Coroutine: connects without blocking the event loop and returns the
    /// client. Takes the same arguments as the constructor.
    #[classmethod]
    #[pyo3(signature = (nodes, **options))]
    fn connect<'py>(
        _cls: &Bound<'py, PyType>,
        py: Python<'py>,
        nodes: &Bound<'py, PyAny>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let builder = client_builder("AsyncClient.connect()", nodes, options)?;
        logs::sync_level(py);
        asyncio::awaitable(py, async move {
            Deferred::result(builder.build().await, |py, inner| {
                Ok(Py::new(py, AsyncClient { inner })?.into_any())
            })
        })
    }

    /// Coroutine: takes the lock on `resource`, retrying while it is held
    /// elsewhere for up to `wait` seconds; returns an `AsyncLock`.
    #[pyo3(signature = (resource, ttl=None, wait=None, **options))]
    fn acquire<'py>(
        &self,
        py: Python<'py>,
        resource: &Bound<'py, PyAny>,
        ttl: Option<&Bound<'py, PyAny>>,
        wait: Option<&Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = AcquireArgs::parse("AsyncClient.acquire()", resource, ttl, wait, options)?;
        acquire_awaitable(py, self.inner.clone(), args, None)
    }

    /// Coroutine: one attempt; the `AsyncLock`, or None when held by someone else.
    #[pyo3(signature = (resource, ttl=None, **options))]
    fn try_acquire<'py>(
        &self,
        py: Python<'py>,
        resource: &Bound<'py, PyAny>,
        ttl: Option<&Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = AcquireArgs::parse("AsyncClient.try_acquire()", resource, ttl, None, options)?;
        let task = try_acquire(self.inner.clone(), args.resource, args.options);
        let on_lost = args.on_lost;
        asyncio::awaitable(py, async move {
            Deferred::result(task.await, move |py, lock| match lock {
                None => Ok(py.None()),
                Some(lock) => Ok(AsyncLock::create(py, LockInner::new(lock.claim(), on_lost))?.into_any()),
            })
        })
    }

    /// An async context manager that acquires on entry (same arguments as
    /// `acquire`) and releases on exit: `async with client.lock("jobs:1", ttl=10) as lock:`.
    #[pyo3(signature = (resource, ttl=None, wait=None, **options))]
    fn lock(
        &self,
        resource: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<AsyncLockContext> {
        let args = AcquireArgs::parse("AsyncClient.lock()", resource, ttl, wait, options)?;
        Ok(AsyncLockContext::new(AsyncAcquirer::Lock(
            self.inner.clone(),
            args,
        )))
    }

    /// The counting semaphore `name` with `permits` permits (see
    /// `Client.semaphore`), whose calls are coroutines. No I/O.
    ///
    /// Raises `InvalidArgumentError` for a bad name or number of permits.
    fn semaphore(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        permits: &Bound<'_, PyAny>,
    ) -> PyResult<AsyncSemaphore> {
        let name = text_arg(name, "name")?;
        let permits = permits_arg(permits, &name)?;
        let inner = self
            .inner
            .semaphore(&name, permits)
            .map_err(|e| core_error(py, e))?;
        Ok(AsyncSemaphore::new(inner))
    }

    /// The read-write lock `name` (see `Client.rw_lock`), whose calls are
    /// coroutines. No I/O.
    ///
    /// Raises `InvalidArgumentError` for a bad name.
    fn rw_lock(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<AsyncRwLock> {
        let name = text_arg(name, "name")?;
        let inner = self.inner.rw_lock(&name).map_err(|e| core_error(py, e))?;
        Ok(AsyncRwLock::new(inner))
    }

    /// Coroutine: campaigns to lead the election `name` (see
    /// `Client.campaign`); returns an `AsyncLeadership`. Cancelling the
    /// awaiting task leaves the line, or resigns if it had just won.
    #[pyo3(signature = (name, ttl=None, wait=None, value=None))]
    fn campaign<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        ttl: Option<&Bound<'py, PyAny>>,
        wait: Option<&Bound<'py, PyAny>>,
        value: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = CampaignArgs::parse(name, ttl, wait, value)?;
        let task = campaign(self.inner.clone(), args.name, args.options);
        asyncio::awaitable(py, async move {
            Deferred::result(task.await, |py, won| {
                Ok(AsyncLeadership::create(py, won)?.into_any())
            })
        })
    }

    /// Follows the election `name`: an async iterator of `Leader`s (see
    /// `Client.observe`), for `async for`.
    fn observe(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<AsyncObservation> {
        AsyncObservation::start(py, &self.inner, name)
    }

    /// Coroutine: the fenced write of `Client.fenced_set`.
    fn fenced_set<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
        fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (key, value, token) = fenced_args(key, value, fence)?;
        let client = self.inner.clone();
        asyncio::awaitable(py, async move {
            Deferred::result(client.fenced_set(&key, &value, token).await, |py, ()| {
                Ok(py.None())
            })
        })
    }

    /// Coroutine: what `fenced_set` stored, `(value, fencing_token)`, or None.
    fn fenced_get<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let key = text_arg(key, "key")?;
        let client = self.inner.clone();
        asyncio::awaitable(py, async move {
            Deferred::result(client.fenced_get(&key).await, |py, value| {
                Ok(value.into_pyobject(py)?.into_any().unbind())
            })
        })
    }

    /// Coroutine: each node's view of `resource` (see `Client.inspect`).
    fn inspect<'py>(&self, py: Python<'py>, resource: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let resource = resource_arg(resource)?;
        let client = self.inner.clone();
        asyncio::awaitable(py, async move {
            Deferred::result(client.inspect(&resource).await, inspect_py)
        })
    }

    /// What this client counted, as `Client.metrics()` gives it: a plain
    /// dict, at once (not a coroutine: no I/O).
    fn metrics(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        metrics_py(py, self.inner.metrics())
    }

    /// The nodes, as URLs without passwords.
    #[getter]
    fn nodes(&self) -> Vec<String> {
        self.inner.nodes()
    }

    /// How many nodes must agree: `len(nodes) // 2 + 1`.
    #[getter]
    fn quorum(&self) -> usize {
        self.inner.quorum()
    }

    /// Refuses new operations from now on (they raise `ClosedError`).
    fn close(&self) {
        self.inner.close();
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        asyncio::ready(slf.py(), slf.into_any().unbind())
    }

    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc_type: Option<&Bound<'py, PyAny>>,
        _exc_value: Option<&Bound<'py, PyAny>>,
        _traceback: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.inner.close();
        asyncio::awaitable(py, async move {
            Deferred::new(|py| Ok(pyo3::types::PyBool::new(py, false).to_owned().into_any().unbind()))
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<fencelock.AsyncClient nodes={:?} quorum={}>",
            self.inner.nodes(),
            self.inner.quorum()
        )
    }
}

/// Where `AsyncLockContext` keeps its lock for `__aexit__`.
pub(crate) type LockSlot = Arc<Mutex<Option<Py<AsyncLock>>>>;

/// The awaitable of `acquire` and `AsyncLockContext.__aenter__`: acquires on
/// the runtime and wraps the lock for Python (also into `slot`, if given).
fn acquire_awaitable<'py>(
    py: Python<'py>,
    client: fencelock::Client,
    args: AcquireArgs,
    slot: Option<LockSlot>,
) -> PyResult<Bound<'py, PyAny>> {
    let task = acquire(client, args.resource, args.options);
    let on_lost = args.on_lost;
    asyncio::awaitable(py, async move {
        Deferred::result(task.await, move |py, lock| {
            let lock = AsyncLock::create(py, LockInner::new(lock.claim(), on_lost))?;
            if let Some(slot) = slot {
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(lock.clone_ref(py));
            }
            Ok(lock.into_any())
        })
    })
}

/// What an `AsyncLockContext` acquires on entry.
pub(crate) enum AsyncAcquirer {
    /// `AsyncClient.lock(...)`: the lock on a resource.
    Lock(fencelock::Client, AcquireArgs),
    /// `AsyncSemaphore.permit(...)`: a permit of the semaphore.
    Permit(fencelock::Semaphore, PermitArgs),
    /// `AsyncRwLock.read(...)` or `AsyncRwLock.write(...)`: a reader's or
    /// the writer's grant.
    Rw(fencelock::RwLock, RwMode, PermitArgs),
}

/// Returned by `AsyncClient.lock(...)`, `AsyncSemaphore.permit(...)`,
/// `AsyncRwLock.read(...)` and `AsyncRwLock.write(...)`: acquires on
/// `__aenter__`, releases on `__aexit__`.
#[pyclass(module = "fencelock", frozen)]
pub struct AsyncLockContext {
    acquirer: AsyncAcquirer,
    lock: LockSlot,
}

impl AsyncLockContext {
    /// A context that acquires what `acquirer` says on entry.
    pub(crate) fn new(acquirer: AsyncAcquirer) -> Self {
        AsyncLockContext {
            acquirer,
            lock: Arc::new(Mutex::new(None)),
        }
    }
}

#[pymethods]
impl AsyncLockContext {
    fn __aenter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let slot = Some(self.lock.clone());
        match &self.acquirer {
            AsyncAcquirer::Lock(client, args) => {
                acquire_awaitable(py, client.clone(), args.clone_ref(py), slot)
            }
            AsyncAcquirer::Permit(sem, args) => {
                semaphore::acquire_awaitable(py, sem.clone(), args.clone_ref(py), slot)
            }
            AsyncAcquirer::Rw(rw, mode, args) => {
                rw_lock::acquire_awaitable(py, rw.clone(), *mode, args.clone_ref(py), slot)
            }
        }
    }

    /// Releases the lock; a release error is raised only when the block
    /// itself finished without an exception.
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        exc_type: Option<&Bound<'py, PyType>>,
        _exc_value: Option<&Bound<'py, PyAny>>,
        _traceback: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
        match lock {
            Some(lock) => AsyncLock::release_awaitable(lock.bind(py), exc_type.is_some()),
            None => asyncio::awaitable(py, async move { Deferred::new(|py| Ok(py.None())) }),
        }
    }
}

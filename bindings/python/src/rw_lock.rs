//! `RwLock` (sync) and `AsyncRwLock` (asyncio): what `client.rw_lock(name)`
//! returns.
//!
//! A reader's or a writer's grant is a core [`fencelock::Lock`] (on the
//! reader's own key or on the write key), so both classes hand out the lock
//! classes of their client (`Lock`, `AsyncLock`), and their `read(...)` and
//! `write(...)` context managers are the clients' `LockContext` and
//! `AsyncLockContext`: renewal, the lost signal, the fence and release are
//! the lock's own, and `resource` is the read-write lock's name. Arguments,
//! GIL release, Ctrl-C, task cancellation and a grant that came just as its
//! wait was given up (released, never leaked) are handled as for
//! `Client.acquire` and `AsyncClient.acquire`.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::args::PermitArgs;
use crate::async_client::{AsyncAcquirer, AsyncLockContext, LockSlot};
use crate::asyncio;
use crate::calls::{RwMode, acquire_rw, try_acquire_rw};
use crate::errors::core_error;
use crate::lock::{AsyncLock, Lock, LockInner};
use crate::rt::{self, Deferred};
use crate::sync_client::{Acquirer, LockContext};

/// Takes the lock for reading or writing (GIL released, Ctrl-C interrupts
/// on the main thread) and wraps the grant for Python: `RwLock.acquire_read`,
/// `RwLock.acquire_write` and `LockContext.__enter__`.
pub(crate) fn acquire_blocking(
    py: Python<'_>,
    rw: &fencelock::RwLock,
    mode: RwMode,
    args: PermitArgs,
) -> PyResult<Py<Lock>> {
    let task = acquire_rw(rw.clone(), mode, args.options);
    let grant = rt::wait(py, task)?.map_err(|e| core_error(py, e))?;
    Lock::create(py, LockInner::new(grant.claim(), args.on_lost))
}

/// One attempt to read or write (GIL released): the grant as a `Lock`, or
/// None when refused.
fn try_blocking(
    py: Python<'_>,
    rw: &fencelock::RwLock,
    mode: RwMode,
    args: PermitArgs,
) -> PyResult<Option<Py<Lock>>> {
    let task = try_acquire_rw(rw.clone(), mode, args.options);
    match rt::wait(py, task)?.map_err(|e| core_error(py, e))? {
        None => Ok(None),
        Some(grant) => Lock::create(py, LockInner::new(grant.claim(), args.on_lost)).map(Some),
    }
}

/// The awaitable of `AsyncRwLock.acquire_read` and `acquire_write`, and of
/// `AsyncLockContext.__aenter__` for a read-write lock: takes the grant on
/// the runtime and wraps it for Python (also into `slot`, if given).
pub(crate) fn acquire_awaitable<'py>(
    py: Python<'py>,
    rw: fencelock::RwLock,
    mode: RwMode,
    args: PermitArgs,
    slot: Option<LockSlot>,
) -> PyResult<Bound<'py, PyAny>> {
    let task = acquire_rw(rw, mode, args.options);
    let on_lost = args.on_lost;
    asyncio::awaitable(py, async move {
        Deferred::result(task.await, move |py, grant| {
            let lock = AsyncLock::create(py, LockInner::new(grant.claim(), on_lost))?;
            if let Some(slot) = slot {
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(lock.clone_ref(py));
            }
            Ok(lock.into_any())
        })
    })
}

/// The awaitable of `AsyncRwLock.try_read` and `try_write`: an `AsyncLock`,
/// or None when refused.
fn try_awaitable<'py>(
    py: Python<'py>,
    rw: fencelock::RwLock,
    mode: RwMode,
    args: PermitArgs,
) -> PyResult<Bound<'py, PyAny>> {
    let task = try_acquire_rw(rw, mode, args.options);
    let on_lost = args.on_lost;
    asyncio::awaitable(py, async move {
        Deferred::result(task.await, move |py, grant| match grant {
            None => Ok(py.None()),
            Some(grant) => Ok(AsyncLock::create(py, LockInner::new(grant.claim(), on_lost))?.into_any()),
        })
    })
}

fn repr(class: &str, rw: &fencelock::RwLock) -> String {
    format!("<fencelock.{class} name={:?}>", rw.name())
}

/// A read-write lock (from `Client.rw_lock`): any number of readers at
/// once, or one writer. Each reader and each writer holds a `Lock` of its
/// own (renewed while held, with its lost signal and fencing token; its
/// `resource` is this lock's name); release it, or use `with rw.read(...)`
/// / `with rw.write(...)`, to let the next one in.
///
/// A writer's fencing token is larger than that of every reader and writer
/// granted before it. Writers are not starved: once a writer waits,
/// readers that come later wait behind it. The name is not a lock's: a
/// lock, a semaphore and a read-write lock of the same name do not exclude
/// each other.
#[pyclass(module = "fencelock", frozen)]
pub struct RwLock {
    inner: fencelock::RwLock,
}

impl RwLock {
    /// Wraps a core read-write lock for the sync API.
    pub(crate) fn new(inner: fencelock::RwLock) -> Self {
        RwLock { inner }
    }
}

#[pymethods]
impl RwLock {
    /// The read-write lock's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Takes the lock for reading, beside other readers, waiting (woken by
    /// push) while a writer holds it or waits ahead, for up to `wait`
    /// seconds; returns the reader's `Lock`. `ttl` and the options are
    /// those of `Client.acquire`.
    ///
    /// Raises `LockTimeoutError` when `wait` passed (`NotAcquiredError`
    /// when `wait` is 0), `UnavailableError` when a majority of nodes
    /// cannot be reached.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn acquire_read(
        &self,
        py: Python<'_>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<Lock>> {
        let args = PermitArgs::parse("RwLock.acquire_read()", ttl, wait, options)?;
        acquire_blocking(py, &self.inner, RwMode::Read, args)
    }

    /// Takes the lock for writing, alone, waiting (woken by push) while
    /// readers or another writer hold it, for up to `wait` seconds; returns
    /// the writer's `Lock`. Arguments and errors as `acquire_read`.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn acquire_write(
        &self,
        py: Python<'_>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<Lock>> {
        let args = PermitArgs::parse("RwLock.acquire_write()", ttl, wait, options)?;
        acquire_blocking(py, &self.inner, RwMode::Write, args)
    }

    /// One attempt to read: the reader's `Lock`, or None when a writer
    /// holds the lock or waits for it.
    #[pyo3(signature = (ttl=None, **options))]
    fn try_read(
        &self,
        py: Python<'_>,
        ttl: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Option<Py<Lock>>> {
        let args = PermitArgs::parse("RwLock.try_read()", ttl, None, options)?;
        try_blocking(py, &self.inner, RwMode::Read, args)
    }

    /// One attempt to write: the writer's `Lock`, or None when anyone else
    /// holds the lock.
    #[pyo3(signature = (ttl=None, **options))]
    fn try_write(
        &self,
        py: Python<'_>,
        ttl: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Option<Py<Lock>>> {
        let args = PermitArgs::parse("RwLock.try_write()", ttl, None, options)?;
        try_blocking(py, &self.inner, RwMode::Write, args)
    }

    /// A context manager that takes the lock for reading on entry (same
    /// arguments as `acquire_read`) and releases it on exit:
    /// `with rw.read(ttl=10, wait=5) as lock:`.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn read(
        &self,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<LockContext> {
        let args = PermitArgs::parse("RwLock.read()", ttl, wait, options)?;
        Ok(LockContext::new(Acquirer::Rw(
            self.inner.clone(),
            RwMode::Read,
            args,
        )))
    }

    /// A context manager that takes the lock for writing on entry (same
    /// arguments as `acquire_write`) and releases it on exit:
    /// `with rw.write(ttl=10, wait=5) as lock:`.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn write(
        &self,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<LockContext> {
        let args = PermitArgs::parse("RwLock.write()", ttl, wait, options)?;
        Ok(LockContext::new(Acquirer::Rw(
            self.inner.clone(),
            RwMode::Write,
            args,
        )))
    }

    fn __repr__(&self) -> String {
        repr("RwLock", &self.inner)
    }
}

/// A read-write lock (from `AsyncClient.rw_lock`): the asyncio twin of
/// `RwLock`, whose calls are coroutines handing out `AsyncLock`s.
/// Cancelling the task awaiting `acquire_read` or `acquire_write` cancels
/// the attempt and undoes any partial grant.
#[pyclass(module = "fencelock", frozen)]
pub struct AsyncRwLock {
    inner: fencelock::RwLock,
}

impl AsyncRwLock {
    /// Wraps a core read-write lock for the asyncio API.
    pub(crate) fn new(inner: fencelock::RwLock) -> Self {
        AsyncRwLock { inner }
    }
}

#[pymethods]
impl AsyncRwLock {
    /// The read-write lock's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Coroutine: takes the lock for reading, waiting for up to `wait`
    /// seconds (see `RwLock.acquire_read`); returns an `AsyncLock`.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn acquire_read<'py>(
        &self,
        py: Python<'py>,
        ttl: Option<&Bound<'py, PyAny>>,
        wait: Option<&Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = PermitArgs::parse("AsyncRwLock.acquire_read()", ttl, wait, options)?;
        acquire_awaitable(py, self.inner.clone(), RwMode::Read, args, None)
    }

    /// Coroutine: takes the lock for writing, waiting for up to `wait`
    /// seconds (see `RwLock.acquire_write`); returns an `AsyncLock`.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn acquire_write<'py>(
        &self,
        py: Python<'py>,
        ttl: Option<&Bound<'py, PyAny>>,
        wait: Option<&Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = PermitArgs::parse("AsyncRwLock.acquire_write()", ttl, wait, options)?;
        acquire_awaitable(py, self.inner.clone(), RwMode::Write, args, None)
    }

    /// Coroutine: one attempt to read; an `AsyncLock`, or None when a
    /// writer holds the lock or waits for it.
    #[pyo3(signature = (ttl=None, **options))]
    fn try_read<'py>(
        &self,
        py: Python<'py>,
        ttl: Option<&Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = PermitArgs::parse("AsyncRwLock.try_read()", ttl, None, options)?;
        try_awaitable(py, self.inner.clone(), RwMode::Read, args)
    }

    /// Coroutine: one attempt to write; an `AsyncLock`, or None when
    /// anyone else holds the lock.
    #[pyo3(signature = (ttl=None, **options))]
    fn try_write<'py>(
        &self,
        py: Python<'py>,
        ttl: Option<&Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = PermitArgs::parse("AsyncRwLock.try_write()", ttl, None, options)?;
        try_awaitable(py, self.inner.clone(), RwMode::Write, args)
    }

    /// An async context manager that takes the lock for reading on entry
    /// (same arguments as `acquire_read`) and releases it on exit:
    /// `async with rw.read(ttl=10, wait=5) as lock:`.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn read(
        &self,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<AsyncLockContext> {
        let args = PermitArgs::parse("AsyncRwLock.read()", ttl, wait, options)?;
        Ok(AsyncLockContext::new(AsyncAcquirer::Rw(
            self.inner.clone(),
            RwMode::Read,
            args,
        )))
    }

    /// An async context manager that takes the lock for writing on entry
    /// (same arguments as `acquire_write`) and releases it on exit:
    /// `async with rw.write(ttl=10, wait=5) as lock:`.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn write(
        &self,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<AsyncLockContext> {
        let args = PermitArgs::parse("AsyncRwLock.write()", ttl, wait, options)?;
        Ok(AsyncLockContext::new(AsyncAcquirer::Rw(
            self.inner.clone(),
            RwMode::Write,
            args,
        )))
    }

    fn __repr__(&self) -> String {
        repr("AsyncRwLock", &self.inner)
    }
}

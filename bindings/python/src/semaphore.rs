//! `Semaphore` (sync) and `AsyncSemaphore` (asyncio): what
//! `client.semaphore(name, permits)` returns.
//!
//! A permit is a core [`fencelock::Lock`] on one of the semaphore's permit
//! keys, so both classes hand out the lock classes of their client (`Lock`,
//! `AsyncLock`) and their `permit(...)` context managers are the clients'
//! `LockContext` and `AsyncLockContext`: renewal, the lost signal, the
//! fence and release are the lock's own, and `lock.permit` says which
//! permit it holds. Arguments, GIL release, Ctrl-C, task cancellation and a
//! permit granted just as its wait was given up (released, never leaked)
//! are handled as for `Client.acquire` and `AsyncClient.acquire`.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::args::PermitArgs;
use crate::async_client::{AsyncAcquirer, AsyncLockContext, LockSlot};
use crate::asyncio;
use crate::calls::{acquire_permit, try_acquire_permit};
use crate::errors::core_error;
use crate::lock::{AsyncLock, Lock, LockInner};
use crate::rt::{self, Deferred};
use crate::sync_client::{Acquirer, LockContext};

/// Takes a permit (GIL released, Ctrl-C interrupts on the main thread) and
/// wraps it for Python: `Semaphore.acquire` and `LockContext.__enter__`.
pub(crate) fn acquire_blocking(
    py: Python<'_>,
    semaphore: &fencelock::Semaphore,
    args: PermitArgs,
) -> PyResult<Py<Lock>> {
    let task = acquire_permit(semaphore.clone(), args.options);
    let permit = rt::wait(py, task)?.map_err(|e| core_error(py, e))?;
    Lock::create(py, LockInner::new(permit.claim(), args.on_lost))
}

/// The awaitable of `AsyncSemaphore.acquire` and of
/// `AsyncLockContext.__aenter__` for a permit: takes it on the runtime and
/// wraps it for Python (also into `slot`, if given).
pub(crate) fn acquire_awaitable<'py>(
    py: Python<'py>,
    semaphore: fencelock::Semaphore,
    args: PermitArgs,
    slot: Option<LockSlot>,
) -> PyResult<Bound<'py, PyAny>> {
    let task = acquire_permit(semaphore, args.options);
    let on_lost = args.on_lost;
    asyncio::awaitable(py, async move {
        Deferred::result(task.await, move |py, permit| {
            let lock = AsyncLock::create(py, LockInner::new(permit.claim(), on_lost))?;
            if let Some(slot) = slot {
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(lock.clone_ref(py));
            }
            Ok(lock.into_any())
        })
    })
}

fn repr(class: &str, semaphore: &fencelock::Semaphore) -> String {
    format!(
        "<fencelock.{class} name={:?} permits={}>",
        semaphore.name(),
        semaphore.permits()
    )
}

/// A counting semaphore (from `Client.semaphore`): at most `permits`
/// holders at once. Each holder holds a `Lock` (renewed while held, with
/// its lost signal and fencing token) whose `permit` says which permit it
/// is; release it, or use `with sem.permit(...)`, to let the next one in.
///
/// Every client of a semaphore must give the same number of permits while
/// it is in use: a different one raises `InvalidArgumentError` ("has N
/// permits") on acquire. The semaphore's name is not a lock's: a lock and
/// a semaphore of the same name do not exclude each other.
#[pyclass(module = "fencelock", frozen)]
pub struct Semaphore {
    inner: fencelock::Semaphore,
}

impl Semaphore {
    /// Wraps a core semaphore for the sync API.
    pub(crate) fn new(inner: fencelock::Semaphore) -> Self {
        Semaphore { inner }
    }
}

#[pymethods]
impl Semaphore {
    /// The semaphore's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// How many holders it admits at once.
    #[getter]
    fn permits(&self) -> u32 {
        self.inner.permits()
    }

    /// Takes a permit, waiting (woken by push when one is released) for up
    /// to `wait` seconds; returns it as a `Lock` (`lock.permit` is its
    /// number). `ttl` and the options are those of `Client.acquire`.
    ///
    /// Raises `LockTimeoutError` when `wait` passed (`NotAcquiredError`
    /// when `wait` is 0), `InvalidArgumentError` when the semaphore is in
    /// use with another number of permits, `UnavailableError` when a
    /// majority of nodes cannot be reached.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn acquire(
        &self,
        py: Python<'_>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<Lock>> {
        let args = PermitArgs::parse("Semaphore.acquire()", ttl, wait, options)?;
        acquire_blocking(py, &self.inner, args)
    }

    /// One attempt: a permit (a `Lock`), or None when every permit is held.
    #[pyo3(signature = (ttl=None, **options))]
    fn try_acquire(
        &self,
        py: Python<'_>,
        ttl: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Option<Py<Lock>>> {
        let args = PermitArgs::parse("Semaphore.try_acquire()", ttl, None, options)?;
        let task = try_acquire_permit(self.inner.clone(), args.options);
        match rt::wait(py, task)?.map_err(|e| core_error(py, e))? {
            None => Ok(None),
            Some(permit) => Lock::create(py, LockInner::new(permit.claim(), args.on_lost)).map(Some),
        }
    }

    /// A context manager that takes a permit on entry (same arguments as
    /// `acquire`) and releases it on exit: `with sem.permit(ttl=10, wait=5) as lock:`.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn permit(
        &self,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<LockContext> {
        let args = PermitArgs::parse("Semaphore.permit()", ttl, wait, options)?;
        Ok(LockContext::new(Acquirer::Permit(self.inner.clone(), args)))
    }

    /// How many permits are held now (held on a majority of the nodes). For
    /// monitoring: the answer may be out of date when it arrives.
    fn holders(&self, py: Python<'_>) -> PyResult<usize> {
        let semaphore = self.inner.clone();
        rt::wait(py, async move { semaphore.holders().await })?.map_err(|e| core_error(py, e))
    }

    fn __repr__(&self) -> String {
        repr("Semaphore", &self.inner)
    }
}

/// A counting semaphore (from `AsyncClient.semaphore`): the asyncio twin of
/// `Semaphore`, whose calls are coroutines handing out `AsyncLock`s.
/// Cancelling the task awaiting `acquire` cancels the attempt and undoes
/// any partial grant.
#[pyclass(module = "fencelock", frozen)]
pub struct AsyncSemaphore {
    inner: fencelock::Semaphore,
}

impl AsyncSemaphore {
    /// Wraps a core semaphore for the asyncio API.
    pub(crate) fn new(inner: fencelock::Semaphore) -> Self {
        AsyncSemaphore { inner }
    }
}

#[pymethods]
impl AsyncSemaphore {
    /// The semaphore's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// How many holders it admits at once.
    #[getter]
    fn permits(&self) -> u32 {
        self.inner.permits()
    }

    /// Coroutine: takes a permit, waiting for up to `wait` seconds (see
    /// `Semaphore.acquire`); returns it as an `AsyncLock`.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn acquire<'py>(
        &self,
        py: Python<'py>,
        ttl: Option<&Bound<'py, PyAny>>,
        wait: Option<&Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = PermitArgs::parse("AsyncSemaphore.acquire()", ttl, wait, options)?;
        acquire_awaitable(py, self.inner.clone(), args, None)
    }

    /// Coroutine: one attempt; a permit (an `AsyncLock`), or None when
    /// every permit is held.
    #[pyo3(signature = (ttl=None, **options))]
    fn try_acquire<'py>(
        &self,
        py: Python<'py>,
        ttl: Option<&Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = PermitArgs::parse("AsyncSemaphore.try_acquire()", ttl, None, options)?;
        let task = try_acquire_permit(self.inner.clone(), args.options);
        let on_lost = args.on_lost;
        asyncio::awaitable(py, async move {
            Deferred::result(task.await, move |py, permit| match permit {
                None => Ok(py.None()),
                Some(permit) => {
                    Ok(AsyncLock::create(py, LockInner::new(permit.claim(), on_lost))?.into_any())
                }
            })
        })
    }

    /// An async context manager that takes a permit on entry (same
    /// arguments as `acquire`) and releases it on exit:
    /// `async with sem.permit(ttl=10, wait=5) as lock:`.
    #[pyo3(signature = (ttl=None, wait=None, **options))]
    fn permit(
        &self,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<AsyncLockContext> {
        let args = PermitArgs::parse("AsyncSemaphore.permit()", ttl, wait, options)?;
        Ok(AsyncLockContext::new(AsyncAcquirer::Permit(
            self.inner.clone(),
            args,
        )))
    }

    /// Coroutine: how many permits are held now (see `Semaphore.holders`).
    fn holders<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let semaphore = self.inner.clone();
        asyncio::awaitable(py, async move {
            Deferred::result(semaphore.holders().await, |py, held| {
                Ok(held.into_pyobject(py)?.into_any().unbind())
            })
        })
    }

    fn __repr__(&self) -> String {
        repr("AsyncSemaphore", &self.inner)
    }
}

//! `Leadership` (sync) and `AsyncLeadership` (asyncio): what `campaign`
//! returns.
//!
//! A leadership is a lock on the election's name (the core's
//! `Leadership::into_lock`), so both classes derive from the lock classes'
//! base `_LockBase` through `_LeadershipBase`: the lost signal, `fence`,
//! `remaining` and `status` are the lock's own, and `epoch`, `name` and
//! `is_leader()` are the lock's fencing token, resource and `is_held()`
//! under the election's names. `resign` is the lock's release.

use pyo3::prelude::*;
use pyo3::pyclass_init::PyClassInitializer;
use pyo3::types::{PyBytes, PyType};

use crate::asyncio;
use crate::calls::Won;
use crate::lock::{LockBase, LockInner};

/// How many bytes of a value `repr` shows before it only gives the length.
const REPR_VALUE_BYTES: usize = 64;

/// What `Leadership` and `AsyncLeadership` share: the announced value and
/// the election's names for the lock's state. The private Python base class
/// `_LeadershipBase` of both; each adds its own `resign` and (async)
/// context manager.
#[pyclass(name = "_LeadershipBase", module = "fencelock", extends = LockBase, subclass, frozen)]
pub struct LeadershipBase {
    value: Vec<u8>,
}

impl LeadershipBase {
    /// The base part of a new `Leadership` or `AsyncLeadership` over `won`'s lock.
    fn init(py: Python<'_>, won: Won) -> PyResult<PyClassInitializer<Self>> {
        // No `on_lost` callback: a leader waits on `lost` instead.
        let inner = LockInner::new(won.lock.claim(), None);
        Ok(LockBase::init(py, inner)?.add_subclass(LeadershipBase { value: won.value }))
    }

    fn lock<'a>(slf: &'a Bound<'_, Self>) -> &'a fencelock::Lock {
        slf.as_super().get().core_lock()
    }
}

#[pymethods]
impl LeadershipBase {
    /// The election's name.
    #[getter]
    fn name<'a>(slf: &'a Bound<'_, Self>) -> &'a str {
        Self::lock(slf).resource()
    }

    /// This leader's epoch: its fencing token, larger than every earlier
    /// leader's. Pass `fence` (the epoch with this grant's holder id) with
    /// every write, so a deposed leader's late writes are refused.
    #[getter]
    fn epoch(slf: &Bound<'_, Self>) -> u64 {
        Self::lock(slf).fencing_token()
    }

    /// The value announced to observers (bytes).
    #[getter]
    fn value<'py>(slf: &Bound<'py, Self>) -> Bound<'py, PyBytes> {
        PyBytes::new(slf.py(), &slf.get().value)
    }

    /// True while this is the leader as far as this process can know: the
    /// lease has not run out and no renewal found it taken.
    fn is_leader(slf: &Bound<'_, Self>) -> bool {
        Self::lock(slf).is_held()
    }

    /// `<fencelock.Leadership name=... epoch=... value=... status=...>`.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let value = &slf.get().value;
        let shown = if value.len() <= REPR_VALUE_BYTES {
            PyBytes::new(py, value).repr()?.to_string()
        } else {
            format!("<{} bytes>", value.len())
        };
        let base = slf.as_super().get();
        let lock = base.core_lock();
        Ok(format!(
            "<fencelock.{} name={:?} epoch={} value={shown} status={} remaining={:.3}s>",
            slf.get_type().name()?,
            lock.resource(),
            lock.fencing_token(),
            base.status(),
            lock.remaining().as_secs_f64()
        ))
    }
}

/// Leadership of an election (from `Client.campaign`). Use it as a context
/// manager to resign at the end of the block.
///
/// Dropping the object without `resign()` stops renewing; another candidate
/// wins once the lease runs out.
#[pyclass(module = "fencelock", extends = LeadershipBase, frozen)]
pub struct Leadership;

impl Leadership {
    /// Wraps a won campaign for the sync API.
    pub(crate) fn create(py: Python<'_>, won: Won) -> PyResult<Py<Leadership>> {
        Py::new(py, LeadershipBase::init(py, won)?.add_subclass(Leadership))
    }
}

#[pymethods]
impl Leadership {
    /// Gives up leadership at once: the next candidate in line wins. Raises
    /// `NotHeldError` if leadership had already been lost or given up.
    fn resign(slf: &Bound<'_, Self>) -> PyResult<()> {
        slf.as_super().as_super().get().release_blocking(slf.py())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Resigns. A resign error (leadership lost meanwhile) is raised only
    /// when the block itself finished without an exception.
    fn __exit__(
        slf: &Bound<'_, Self>,
        exc_type: Option<&Bound<'_, PyType>>,
        _exc_value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let base = slf.as_super().as_super().get();
        base.release_on_exit(slf.py(), exc_type.is_some())
    }
}

/// Leadership of an election (from `AsyncClient.campaign`); `resign` is a
/// coroutine. Use it with `async with` to resign at the end of the block.
#[pyclass(module = "fencelock", extends = LeadershipBase, frozen)]
pub struct AsyncLeadership;

impl AsyncLeadership {
    /// Wraps a won campaign for the asyncio API.
    pub(crate) fn create(py: Python<'_>, won: Won) -> PyResult<Py<AsyncLeadership>> {
        Py::new(py, LeadershipBase::init(py, won)?.add_subclass(AsyncLeadership))
    }
}

#[pymethods]
impl AsyncLeadership {
    /// Coroutine: gives up leadership at once (see `Leadership.resign`).
    fn resign<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.as_super().as_super().get().release_awaitable(slf.py(), false)
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        asyncio::ready(slf.py(), slf.into_any().unbind())
    }

    /// Resigns; a resign error is raised only when the block itself
    /// finished without an exception.
    fn __aexit__<'py>(
        slf: &Bound<'py, Self>,
        exc_type: Option<&Bound<'py, PyType>>,
        _exc_value: Option<&Bound<'py, PyAny>>,
        _traceback: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let base = slf.as_super().as_super().get();
        base.release_awaitable(slf.py(), exc_type.is_some())
    }
}

//! Following an election: `Leader`, and what `observe` returns, the
//! iterator `Observation` (sync) and the async iterator `AsyncObservation`.
//!
//! Both wrap the core's `Observation` (leaders fed by push; its waits take
//! turns and `close` ends them) in [`Follow`], which waits on it from the
//! core's runtime with the GIL released.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::PyStopAsyncIteration;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::{Scope, leader_value, opt_seconds, unsigned};
use crate::asyncio;
use crate::errors::core_error;
use crate::rt::{self, Deferred};

/// A leader of an election, as observers learn of it: the value it
/// announced and its epoch (its fencing token). Immutable, comparable and
/// hashable; `Leader(value, epoch)` makes one (for comparisons in tests).
#[pyclass(module = "fencelock", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Leader {
    value: Vec<u8>,
    epoch: u64,
}

impl From<fencelock::Leader> for Leader {
    fn from(leader: fencelock::Leader) -> Self {
        Leader {
            value: leader.value,
            epoch: leader.epoch,
        }
    }
}

#[pymethods]
impl Leader {
    /// A leader with this value (bytes, or str as UTF-8) and epoch.
    #[new]
    fn new(value: &Bound<'_, PyAny>, epoch: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(Leader {
            value: leader_value(value)?,
            epoch: unsigned::<u64>(epoch, "epoch")?,
        })
    }

    /// The value the leader announced (bytes).
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.value)
    }

    /// The leader's epoch: its fencing token, larger than every earlier leader's.
    #[getter]
    fn epoch(&self) -> u64 {
        self.epoch
    }

    /// `Leader(value=b'10.0.0.7:8080', epoch=12)`.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let value = PyBytes::new(py, &self.value).repr()?;
        Ok(format!("Leader(value={value}, epoch={})", self.epoch))
    }
}

/// What `Observation` and `AsyncObservation` share: the core's observation,
/// which waits can share and `close` ends.
struct Follow {
    name: String,
    observation: Arc<fencelock::Observation>,
}

impl Follow {
    /// Starts following the election `name` (its subscriptions start on the
    /// core's runtime at once).
    fn start(py: Python<'_>, client: &fencelock::Client, name: &Bound<'_, PyAny>) -> PyResult<Self> {
        let name = crate::args::election_arg(name)?;
        let observation = client.observe(&name).map_err(|e| core_error(py, e))?;
        Ok(Follow {
            name,
            observation: Arc::new(observation),
        })
    }

    /// The next leader within `timeout` (no limit when None). None when the
    /// timeout passed, the observation was closed (before or meanwhile), or
    /// the runtime behind it is gone. Dropping the future (Ctrl-C, a
    /// cancelled task) loses nothing: the next call carries on.
    fn next_task(&self, timeout: Option<Duration>) -> impl Future<Output = Option<Leader>> + Send + 'static {
        let observation = self.observation.clone();
        async move {
            let leader = match timeout {
                None => observation.next().await,
                Some(limit) => tokio::time::timeout(limit, observation.next())
                    .await
                    .ok()
                    .flatten(),
            };
            leader.map(Leader::from)
        }
    }

    /// Stops following: ends the waits in progress and the subscriptions. Idempotent.
    fn close(&self) {
        self.observation.close();
    }

    fn is_closed(&self) -> bool {
        self.observation.is_closed()
    }

    fn repr(&self, class: &str) -> String {
        let state = if self.is_closed() { "closed" } else { "open" };
        format!("<fencelock.{class} name={:?} {state}>", self.name)
    }
}

/// The leaders of one election (from `Client.observe`), in increasing
/// epochs: the current leader if there is one, then each new one as it is
/// elected. A consumer slower than the elections skips to the latest.
///
/// `for leader in client.observe("svc"):` waits (GIL released, Ctrl-C
/// interrupts on the main thread) and ends once `close()` is called, from
/// any thread; `next(timeout)` waits at most `timeout` seconds. Use it as a
/// context manager to close it at the end of the block.
#[pyclass(module = "fencelock", frozen)]
pub struct Observation {
    follow: Follow,
}

impl Observation {
    /// Follows `name` for `Client.observe`.
    pub(crate) fn start(
        py: Python<'_>,
        client: &fencelock::Client,
        name: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Follow::start(py, client, name).map(|follow| Observation { follow })
    }
}

#[pymethods]
impl Observation {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The next leader; stops the iteration once closed.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Leader>> {
        rt::wait(py, self.follow.next_task(None))
    }

    /// The next leader, waiting at most `timeout` seconds (None: as long as
    /// it takes); None if none came in time or the observation is closed.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Leader>> {
        let timeout = opt_seconds(timeout, "timeout", true, Scope::Call)?;
        rt::wait(py, self.follow.next_task(timeout))
    }

    /// The election's name.
    #[getter]
    fn name(&self) -> &str {
        &self.follow.name
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.follow.is_closed()
    }

    /// Stops following (its subscriptions end); a waiting iteration ends.
    fn close(&self) {
        self.follow.close();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the observation.
    fn __exit__(
        &self,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc_value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.follow.close();
        false
    }

    fn __repr__(&self) -> String {
        self.follow.repr("Observation")
    }
}

/// The asyncio twin of `Observation` (from `AsyncClient.observe`): `async
/// for leader in client.observe("svc"):`. Cancelling the task that waits
/// cancels only that wait; `close()` ends the iteration. Use it with
/// `async with` to close it at the end of the block.
#[pyclass(module = "fencelock", frozen)]
pub struct AsyncObservation {
    follow: Follow,
}

impl AsyncObservation {
    /// Follows `name` for `AsyncClient.observe`.
    pub(crate) fn start(
        py: Python<'_>,
        client: &fencelock::Client,
        name: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Follow::start(py, client, name).map(|follow| AsyncObservation { follow })
    }

    /// An awaitable of the next leader; `or_else` makes the result when
    /// there is none (a timeout passed, or closed).
    fn next_awaitable<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<Duration>,
        or_else: fn(Python<'_>) -> PyResult<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let next = self.follow.next_task(timeout);
        asyncio::awaitable(py, async move {
            let leader = next.await;
            Deferred::new(move |py| match leader {
                Some(leader) => Ok(Py::new(py, leader)?.into_any()),
                None => or_else(py),
            })
        })
    }
}

/// How `__anext__` ends an `async for`.
fn stop_async_iteration(_py: Python<'_>) -> PyResult<Py<PyAny>> {
    Err(PyStopAsyncIteration::new_err(()))
}

/// What `next(timeout)` returns when no leader came.
fn no_leader(py: Python<'_>) -> PyResult<Py<PyAny>> {
    Ok(py.None())
}

#[pymethods]
impl AsyncObservation {
    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Awaitable: the next leader; ends the iteration once closed.
    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.next_awaitable(py, None, stop_async_iteration)
    }

    /// Coroutine: the next leader, waiting at most `timeout` seconds (None:
    /// as long as it takes); None if none came in time or the observation
    /// is closed.
    #[pyo3(signature = (timeout=None))]
    fn next<'py>(&self, py: Python<'py>, timeout: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let timeout = opt_seconds(timeout, "timeout", true, Scope::Call)?;
        self.next_awaitable(py, timeout, no_leader)
    }

    /// The election's name.
    #[getter]
    fn name(&self) -> &str {
        &self.follow.name
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.follow.is_closed()
    }

    /// Stops following (its subscriptions end); a waiting `async for` ends.
    fn close(&self) {
        self.follow.close();
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        asyncio::ready(slf.py(), slf.into_any().unbind())
    }

    /// Closes the observation.
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc_type: Option<&Bound<'py, PyAny>>,
        _exc_value: Option<&Bound<'py, PyAny>>,
        _traceback: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.follow.close();
        asyncio::ready(py, py.None())
    }

    fn __repr__(&self) -> String {
        self.follow.repr("AsyncObservation")
    }
}

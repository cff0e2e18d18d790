//! What every async call of the asyncio API returns: a coroutine over the
//! operation's asyncio future.
//!
//! The operation starts when the method is called (its future is already
//! running on the core's runtime), but asyncio's task APIs
//! (`asyncio.create_task`, `TaskGroup.create_task`) accept coroutines only.
//! This object has the coroutine protocol (`__await__`, `send`, `throw`,
//! `close`), so `collections.abc.Coroutine` and `asyncio.iscoroutine` accept
//! it, and delegates each step to the future's own iterator: awaiting it is
//! awaiting the future.

use pyo3::exceptions::PyStopIteration;
use pyo3::intern;
use pyo3::prelude::*;

use crate::lock::LockBase;

/// A coroutine whose result is the result of an asyncio future.
#[pyclass(module = "fencelock._native", name = "Operation")]
pub struct Operation {
    future: Py<PyAny>,
    /// `future.__await__()`, made on the first step.
    steps: Option<Py<PyAny>>,
    /// Whether the result has an owner: a step handed it over
    /// (`StopIteration`), or [`Operation::abandon`] released its lock.
    settled: bool,
}

impl Operation {
    pub(crate) fn new(future: Bound<'_, PyAny>) -> Self {
        Operation {
            future: future.unbind(),
            steps: None,
            settled: false,
        }
    }

    /// Cancels the operation; when it had already ended with a lock that
    /// no step handed over (the task was cancelled between the result and
    /// its next step), nobody will have that lock: it is released.
    fn abandon(&mut self, py: Python<'_>) -> PyResult<()> {
        let future = self.future.bind(py);
        let cancelled: bool = future.call_method0(intern!(py, "cancel"))?.extract()?;
        if cancelled || self.settled || future.call_method0(intern!(py, "cancelled"))?.extract()? {
            return Ok(());
        }
        self.settled = true;
        if !future.call_method0(intern!(py, "exception"))?.is_none() {
            return Ok(());
        }
        let result = future.call_method0(intern!(py, "result"))?;
        if let Ok(lock) = result.cast::<LockBase>() {
            lock.get().release_unclaimed();
        }
        Ok(())
    }

    fn steps<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if let Some(steps) = &self.steps {
            return Ok(steps.bind(py).clone());
        }
        let steps = self.future.bind(py).call_method0(intern!(py, "__await__"))?;
        self.steps = Some(steps.clone().unbind());
        Ok(steps)
    }
}

#[pymethods]
impl Operation {
    fn __await__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Itself: what `__await__` returns must also be iterable for asyncio's
    /// wrapper of plain awaitables (`yield from x.__await__()`), which
    /// `asyncio.wait_for(lock.lost, 5)` and `ensure_future(lock.lost)` use.
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.send(py, py.None())
    }

    /// Steps the coroutine: yields the future while it runs, then raises
    /// `StopIteration` with its result (or raises its exception).
    fn send(&mut self, py: Python<'_>, value: Py<PyAny>) -> PyResult<Py<PyAny>> {
        let steps = self.steps(py)?;
        let step = steps.call_method1(intern!(py, "send"), (value,));
        if matches!(&step, Err(e) if e.is_instance_of::<PyStopIteration>(py)) {
            self.settled = true;
        }
        step.map(Bound::unbind)
    }

    /// Throws into the coroutine (how a task delivers its cancellation, even
    /// before the first step): nobody will take the result now, so the
    /// operation is cancelled first, and a lock it granted is released,
    /// also one granted before the throw came ([`Operation::abandon`]).
    #[pyo3(signature = (kind, value=None, traceback=None))]
    fn throw(
        &mut self,
        py: Python<'_>,
        kind: Py<PyAny>,
        value: Option<Py<PyAny>>,
        traceback: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.abandon(py)?;
        let steps = self.steps(py)?;
        let thrown = match (value, traceback) {
            (None, _) => steps.call_method1(intern!(py, "throw"), (kind,)),
            (Some(value), None) => steps.call_method1(intern!(py, "throw"), (kind, value)),
            (Some(value), Some(traceback)) => {
                steps.call_method1(intern!(py, "throw"), (kind, value, traceback))
            }
        };
        thrown.map(Bound::unbind)
    }

    /// Closes the coroutine: cancels the operation unless it has finished,
    /// and releases a lock it granted that no step handed over.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        self.abandon(py)?;
        if let Some(steps) = &self.steps {
            steps.bind(py).call_method0(intern!(py, "close"))?;
        }
        Ok(())
    }
}

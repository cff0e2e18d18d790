//! Core errors as Python exceptions.
//!
//! The exception classes live in `fencelock/_errors.py` (plain Python, so
//! they can also derive from `ValueError` and pickle across processes); this
//! module builds instances of them from [`fencelock::Error`].

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyTuple};

use fencelock::{Error, ErrorKind};

static MAKE_ERROR: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The Python exception for a core error: the class of its kind, the core's
/// message (which names the resource and the nodes), and attributes `kind`,
/// `code`, `resource` and `nodes` (per-node outcomes).
pub(crate) fn core_error(py: Python<'_>, err: Error) -> PyErr {
    match build(py, &err) {
        Ok(exc) => PyErr::from_value(exc),
        Err(import_failure) => import_failure,
    }
}

fn build<'py>(py: Python<'py>, err: &Error) -> PyResult<Bound<'py, PyAny>> {
    let make = MAKE_ERROR.get_or_try_init(py, || {
        py.import("fencelock._errors")?
            .getattr("_from_core")
            .map(Bound::unbind)
    })?;
    let nodes = PyList::empty(py);
    for report in err.nodes() {
        let detail = report.outcome.to_string();
        nodes.append(PyTuple::new(
            py,
            [report.node.as_str(), report.outcome.name(), detail.as_str()],
        )?)?;
    }
    make.bind(py).call1((
        err.kind().as_str(),
        err.kind().code(),
        err.to_string(),
        err.resource(),
        nodes,
    ))
}

/// An `InvalidArgumentError` (a `ValueError`) raised by the binding itself.
pub(crate) fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    core_error(py, Error::new(ErrorKind::InvalidArgument, message))
}

/// A `ConfigError` (a `ValueError`) raised by the binding itself.
pub(crate) fn config(py: Python<'_>, message: impl Into<String>) -> PyErr {
    core_error(py, Error::new(ErrorKind::Config, message))
}

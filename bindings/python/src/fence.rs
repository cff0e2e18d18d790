//! `fencelock.Fence`: what a fenced write carries (the core's `Fence`).

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString};

use crate::args::{text_arg, unsigned};
use crate::errors::invalid;

/// What a fenced write carries: the lock's fencing token and its grant's
/// holder id. Storage accepts it over an equal token only from the same
/// grant. ``str(fence)`` is ``"token:holder"``; ``Fence.parse`` reads it back.
#[pyclass(module = "fencelock", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Fence(pub(crate) fencelock::Fence);

#[pymethods]
impl Fence {
    /// A fence of `token` written by grant `holder` (0: a bare token, which
    /// writes only where every stored token is older).
    #[new]
    #[pyo3(signature = (token, holder = None))]
    fn new(py: Python<'_>, token: &Bound<'_, PyAny>, holder: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let token = unsigned::<u64>(token, "token")?;
        let holder = holder.map_or(Ok(0), |h| unsigned::<u64>(h, "holder"))?;
        if holder > fencelock::MAX_HOLDER_ID {
            return Err(invalid(
                py,
                format!(
                    "holder must be at most {}, not {holder}",
                    fencelock::MAX_HOLDER_ID
                ),
            ));
        }
        Ok(Fence(fencelock::Fence { token, holder }))
    }

    /// Reads the text form ``"token:holder"`` (or a bare ``"token"``).
    #[staticmethod]
    fn parse(py: Python<'_>, text: &str) -> PyResult<Self> {
        text.parse()
            .map(Fence)
            .map_err(|e: fencelock::Error| invalid(py, e.message()))
    }

    /// The fencing token.
    #[getter]
    fn token(&self) -> u64 {
        self.0.token
    }

    /// The grant's holder id (0 for a bare token).
    #[getter]
    fn holder(&self) -> u64 {
        self.0.holder
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Fence(token={}, holder={})", self.0.token, self.0.holder)
    }
}

/// A `fence` argument: a `Fence`, its text form, or a bare token (int).
pub(crate) fn fence_arg(obj: &Bound<'_, PyAny>) -> PyResult<fencelock::Fence> {
    if let Ok(fence) = obj.cast::<Fence>() {
        return Ok(fence.get().0);
    }
    if obj.is_instance_of::<PyString>() {
        let text: String = obj.extract()?;
        return Fence::parse(obj.py(), &text).map(|f| f.0);
    }
    if !obj.is_instance_of::<PyBool>() && obj.extract::<i128>().is_err() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "fence must be a Fence (lock.fence), its text 'token:holder', or an int token, not {}",
            obj.get_type().name()?
        )));
    }
    unsigned::<u64>(obj, "fence").map(fencelock::Fence::bare)
}

/// The arguments of `fenced_set(key, value, fence)`.
pub(crate) fn fenced_args(
    key: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    fence: &Bound<'_, PyAny>,
) -> PyResult<(String, String, fencelock::Fence)> {
    Ok((
        text_arg(key, "key")?,
        text_arg(value, "value")?,
        fence_arg(fence)?,
    ))
}

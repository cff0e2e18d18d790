//! Argument parsing shared by the sync and asyncio fronts: seconds as
//! floats, lock options, and client options.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyString};

use fencelock::{ClientBuilder, LockOptions, RetryPolicy, TlsVersion};

use crate::errors::{config, invalid};

/// Whether an argument error is about the client's configuration
/// (`ConfigError`) or about one call (`InvalidArgumentError`).
#[derive(Clone, Copy)]
pub(crate) enum Scope {
    Call,
    Config,
}

fn scoped(py: Python<'_>, scope: Scope, message: String) -> PyErr {
    match scope {
        Scope::Call => invalid(py, message),
        Scope::Config => config(py, message),
    }
}

/// Seconds given as an int, a float or a `datetime.timedelta`, turned into a
/// duration. NaN, infinities, negatives, bools and (unless `allow_zero`)
/// zero are refused with a `ValueError` subclass.
pub(crate) fn seconds(
    obj: &Bound<'_, PyAny>,
    name: &str,
    allow_zero: bool,
    scope: Scope,
) -> PyResult<Duration> {
    let py = obj.py();
    if obj.is_instance_of::<PyBool>() {
        return Err(scoped(
            py,
            scope,
            format!("{name} must be a number of seconds, not a bool"),
        ));
    }
    let value: f64 = if obj.hasattr("total_seconds")? && !obj.is_instance_of::<PyString>() {
        obj.call_method0("total_seconds")?.extract()?
    } else {
        match obj.extract::<f64>() {
            Ok(v) => v,
            Err(_) => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "{name} must be a number of seconds (int or float) or a timedelta, not {}",
                    obj.get_type().name()?
                )));
            }
        }
    };
    if value.is_nan() || value.is_infinite() {
        return Err(scoped(
            py,
            scope,
            format!("{name} must be a finite number of seconds, got {value}"),
        ));
    }
    if value < 0.0 || (value == 0.0 && !allow_zero) {
        let bound = if allow_zero {
            "zero or more"
        } else {
            "greater than zero"
        };
        return Err(scoped(
            py,
            scope,
            format!("{name} must be {bound} seconds, got {value}"),
        ));
    }
    Duration::try_from_secs_f64(value)
        .map_err(|_| scoped(py, scope, format!("{name} of {value} seconds is too large")))
}

/// An optional `seconds` argument (`None` keeps the default).
pub(crate) fn opt_seconds(
    obj: Option<&Bound<'_, PyAny>>,
    name: &str,
    allow_zero: bool,
    scope: Scope,
) -> PyResult<Option<Duration>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => seconds(o, name, allow_zero, scope).map(Some),
    }
}

/// A non-negative integer that is not a bool (fencing tokens, counts).
pub(crate) fn unsigned<T: for<'a, 'py> FromPyObject<'a, 'py>>(
    obj: &Bound<'_, PyAny>,
    name: &str,
) -> PyResult<T> {
    let py = obj.py();
    if obj.is_instance_of::<PyBool>() {
        return Err(invalid(py, format!("{name} must be an int, not a bool")));
    }
    if obj.extract::<i128>().is_err() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{name} must be an int, not {}",
            obj.get_type().name()?
        )));
    }
    obj.extract::<T>()
        .map_err(|_| invalid(py, format!("{name} is out of range: {obj}")))
}

/// The per-acquire options every `acquire`-like call takes.
pub(crate) struct AcquireArgs {
    pub(crate) options: LockOptions,
    pub(crate) on_lost: Option<Py<PyAny>>,
}

impl AcquireArgs {
    /// Parses the keyword arguments of `acquire`, `try_acquire` and `lock`.
    pub(crate) fn parse(
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        auto_renew: Option<bool>,
        max_hold: Option<&Bound<'_, PyAny>>,
        max_renewals: Option<&Bound<'_, PyAny>>,
        on_lost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut options = LockOptions::default();
        if let Some(ttl) = opt_seconds(ttl, "ttl", false, Scope::Call)? {
            options = options.ttl(ttl);
        }
        if let Some(wait) = opt_seconds(wait, "wait", true, Scope::Call)? {
            options = options.wait(wait);
        }
        if let Some(on) = auto_renew {
            options = options.auto_renew(on);
        }
        if let Some(limit) = opt_seconds(max_hold, "max_hold", false, Scope::Call)? {
            options = options.max_hold(limit);
        }
        if let Some(count) = max_renewals.filter(|o| !o.is_none()) {
            options = options.max_renewals(unsigned::<u32>(count, "max_renewals")?);
        }
        let on_lost = match on_lost.filter(|o| !o.is_none()) {
            None => None,
            Some(callback) if callback.is_callable() => Some(callback.clone().unbind()),
            Some(other) => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "on_lost must be callable, not {}",
                    other.get_type().name()?
                )));
            }
        };
        Ok(AcquireArgs { options, on_lost })
    }

    /// A copy (the callback reference is cloned with the GIL).
    pub(crate) fn clone_ref(&self, py: Python<'_>) -> Self {
        AcquireArgs {
            options: self.options.clone(),
            on_lost: self.on_lost.as_ref().map(|c| c.clone_ref(py)),
        }
    }
}

/// Text or bytes (PEM material), as bytes.
fn pem(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<u8>> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(bytes.as_bytes().to_vec());
    }
    if let Ok(text) = obj.cast::<PyString>() {
        return Ok(text.to_cow()?.as_bytes().to_vec());
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "{name} must be str or bytes (PEM text), not {}",
        obj.get_type().name()?
    )))
}

/// A TLS version given as the string `"1.2"` or `"1.3"`. Any other string
/// is a `ConfigError`; anything but a string (`1.3`, `True`, `b"1.3"`) a
/// `TypeError`.
fn tls_version(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<TlsVersion> {
    let Ok(text) = obj.cast::<PyString>() else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{name} must be the string '1.2' or '1.3', not {}",
            obj.get_type().name()?
        )));
    };
    match &*text.to_cow()? {
        "1.2" => Ok(TlsVersion::V1_2),
        "1.3" => Ok(TlsVersion::V1_3),
        _ => Err(config(
            obj.py(),
            format!("{name} must be '1.2' or '1.3', got {}", obj.repr()?),
        )),
    }
}

/// The node list: one URL, or a sequence of URLs.
fn node_list(nodes: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let py = nodes.py();
    if let Ok(one) = nodes.cast::<PyString>() {
        return Ok(vec![one.to_cow()?.into_owned()]);
    }
    let mut urls = Vec::new();
    for item in nodes.try_iter().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err("nodes must be a URL string or a sequence of URL strings")
    })? {
        let item = item?;
        let url = item.cast::<PyString>().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err("nodes must be a URL string or a sequence of URL strings")
        })?;
        urls.push(url.to_cow()?.into_owned());
    }
    if urls.is_empty() {
        return Err(config(
            py,
            "no nodes given; pass one URL (single-node lock) or several independent masters (Redlock)",
        ));
    }
    Ok(urls)
}

/// The client's keyword options, as given to `Client(...)` / `AsyncClient(...)`.
pub(crate) struct ClientArgs<'a, 'py> {
    pub(crate) key_prefix: Option<String>,
    pub(crate) node_timeout: Option<&'a Bound<'py, PyAny>>,
    pub(crate) connect_timeout: Option<&'a Bound<'py, PyAny>>,
    pub(crate) drift_factor: Option<&'a Bound<'py, PyAny>>,
    pub(crate) retry: Option<&'a Bound<'py, PyAny>>,
    pub(crate) default_ttl: Option<&'a Bound<'py, PyAny>>,
    pub(crate) default_wait: Option<&'a Bound<'py, PyAny>>,
    pub(crate) auto_renew: Option<bool>,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) tls_ca_pem: Option<&'a Bound<'py, PyAny>>,
    pub(crate) tls_client_cert_pem: Option<&'a Bound<'py, PyAny>>,
    pub(crate) tls_client_key_pem: Option<&'a Bound<'py, PyAny>>,
    pub(crate) tls_min_version: Option<&'a Bound<'py, PyAny>>,
    pub(crate) allow_mixed_tls: Option<bool>,
}

impl ClientArgs<'_, '_> {
    /// The core builder for `nodes` with these options.
    pub(crate) fn builder(self, nodes: &Bound<'_, PyAny>) -> PyResult<ClientBuilder> {
        let py = nodes.py();
        let mut b = ClientBuilder::default().nodes(node_list(nodes)?);
        if let Some(prefix) = self.key_prefix {
            b = b.key_prefix(prefix);
        }
        if let Some(t) = opt_seconds(self.node_timeout, "node_timeout", false, Scope::Config)? {
            b = b.node_timeout(t);
        }
        if let Some(t) = opt_seconds(self.connect_timeout, "connect_timeout", false, Scope::Config)? {
            b = b.connect_timeout(t);
        }
        if let Some(d) = self.drift_factor.filter(|o| !o.is_none()) {
            if d.is_instance_of::<PyBool>() {
                return Err(config(py, "drift_factor must be a number, not a bool"));
            }
            b = b.drift_factor(d.extract::<f64>()?);
        }
        if let Some(r) = self.retry.filter(|o| !o.is_none()) {
            let (base, max): (Bound<'_, PyAny>, Bound<'_, PyAny>) = r.extract().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(
                    "retry must be a (base_delay, max_delay) pair of seconds",
                )
            })?;
            let base = seconds(&base, "retry base_delay", false, Scope::Config)?;
            let max = seconds(&max, "retry max_delay", false, Scope::Config)?;
            b = b.retry(RetryPolicy::new(base, max));
        }
        if let Some(t) = opt_seconds(self.default_ttl, "default_ttl", false, Scope::Config)? {
            b = b.default_ttl(t);
        }
        if let Some(t) = opt_seconds(self.default_wait, "default_wait", true, Scope::Config)? {
            b = b.default_wait(t);
        }
        if let Some(on) = self.auto_renew {
            b = b.default_auto_renew(on);
        }
        if let Some(user) = self.username {
            b = b.username(user);
        }
        if let Some(password) = self.password {
            b = b.password(password);
        }
        if let Some(ca) = self.tls_ca_pem.filter(|o| !o.is_none()) {
            b = b.tls_ca_pem(pem(ca, "tls_ca_pem")?);
        }
        match (
            self.tls_client_cert_pem.filter(|o| !o.is_none()),
            self.tls_client_key_pem.filter(|o| !o.is_none()),
        ) {
            (None, None) => {}
            (Some(cert), Some(key)) => {
                b = b.tls_client_cert_pem(pem(cert, "tls_client_cert_pem")?, pem(key, "tls_client_key_pem")?);
            }
            _ => {
                return Err(config(
                    py,
                    "tls_client_cert_pem and tls_client_key_pem must be given together",
                ));
            }
        }
        if let Some(version) = self.tls_min_version.filter(|o| !o.is_none()) {
            b = b.tls_min_version(tls_version(version, "tls_min_version")?);
        }
        if let Some(allow) = self.allow_mixed_tls {
            b = b.allow_mixed_tls(allow);
        }
        Ok(b)
    }
}

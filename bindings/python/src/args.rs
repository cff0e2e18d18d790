//! Argument parsing shared by the sync and asyncio fronts: seconds as
//! floats, text arguments, and the two lists of keyword options, each
//! written once below:
//!
//! - the client options of `Client(...)`, `AsyncClient(...)` and
//!   `AsyncClient.connect(...)`: [`ClientOptionArgs`], parsed by
//!   [`client_builder`];
//! - the lock options of `acquire`, `try_acquire` and `lock` on both clients,
//!   of `acquire`, `try_acquire` and `permit` on both semaphore classes, and
//!   of `acquire_read`, `acquire_write`, `try_read`, `try_write`, `read` and
//!   `write` on both read-write lock classes: [`LockOptionArgs`], parsed by
//!   [`AcquireArgs::parse`] and [`PermitArgs::parse`].
//!
//! `campaign` takes named parameters only (`ttl`, `wait`, `value`), parsed
//! once for both clients by [`CampaignArgs::parse`].
//!
//! The methods take them as `**options` (their pyo3 signatures stay short);
//! `_native.pyi` describes them once each as the `TypedDict`s
//! `ClientOptions` and `LockOptions`.

use std::time::Duration;

use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyString};

use fencelock::{CampaignOptions, ClientBuilder, ClientSettings, LockOptions, TlsVersion};

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

/// Declares one list of keyword options: a struct with one field per
/// option, and `collect`, which sorts a call's `**options` into it by name.
///
/// `collect` refuses a name not in the list with the `TypeError` Python
/// raises for an unexpected keyword argument, before looking at any value
/// (as pyo3 did when the options were named parameters). An option given
/// as `None` counts as not given (its default).
macro_rules! keyword_options {
    ($(#[$doc:meta])* struct $name:ident { $($option:ident),+ $(,)? }) => {
        $(#[$doc])*
        struct $name<'py> {
            $($option: Option<Bound<'py, PyAny>>,)+
        }

        impl<'py> $name<'py> {
            /// Sorts the `**options` of `function` (`"Client.acquire()"`) by name.
            fn collect(options: Option<&Bound<'py, PyDict>>, function: &str) -> PyResult<Self> {
                let mut given = $name { $($option: None,)+ };
                for (name, value) in options.into_iter().flatten() {
                    let py = name.py();
                    let slot = 'found: {
                        // Keywords written in Python source are interned: the
                        // same object as `intern!`'s, no text to compare.
                        $(if name.is(pyo3::intern!(py, stringify!($option))) {
                            break 'found &mut given.$option;
                        })+
                        let text = name.cast::<PyString>().ok().and_then(|n| n.to_cow().ok());
                        match text.as_deref() {
                            $(Some(stringify!($option)) => &mut given.$option,)+
                            _ => return Err(unexpected_keyword(function, &name)),
                        }
                    };
                    *slot = Some(value).filter(|v| !v.is_none());
                }
                Ok(given)
            }
        }
    };
}

keyword_options! {
    /// The client options, as given to `Client(nodes, **options)`,
    /// `AsyncClient(nodes, **options)` and `AsyncClient.connect(nodes, **options)`.
    struct ClientOptionArgs {
        key_prefix,
        node_timeout,
        connect_timeout,
        drift_factor,
        retry,
        default_ttl,
        default_wait,
        auto_renew,
        username,
        password,
        tls_ca_pem,
        tls_client_cert_pem,
        tls_client_key_pem,
        tls_min_version,
        allow_mixed_tls,
    }
}

keyword_options! {
    /// The lock options of `acquire(resource, ttl, wait, **options)`,
    /// `try_acquire(resource, ttl, **options)` and `lock(...)` (as `acquire`),
    /// of the semaphores' `acquire`, `try_acquire` and `permit`, and of the
    /// read-write locks' `acquire_read`, `acquire_write`, `try_read`,
    /// `try_write`, `read` and `write`.
    struct LockOptionArgs {
        auto_renew,
        max_hold,
        max_renewals,
        fair,
        on_lost,
    }
}

/// What Python raises for a keyword argument a function does not take.
#[cold]
fn unexpected_keyword(function: &str, name: &Bound<'_, PyAny>) -> PyErr {
    pyo3::exceptions::PyTypeError::new_err(format!("{function} got an unexpected keyword argument '{name}'"))
}

/// An option that must have one Python type (`str`, `bool`), converted the
/// way pyo3 converts such a parameter: its own `TypeError`, with the note
/// "while processing '<name>'" (Python 3.11+).
fn typed<'py, T: FromPyObjectOwned<'py>>(
    value: Option<Bound<'py, PyAny>>,
    name: &str,
) -> PyResult<Option<T>> {
    let Some(value) = value else { return Ok(None) };
    value.extract::<T>().map(Some).map_err(|err| {
        let (py, err) = (value.py(), err.into());
        let _ = err.value(py).call_method1(
            pyo3::intern!(py, "add_note"),
            (format!("while processing '{name}'"),),
        );
        err
    })
}

/// The core builder for `Client(nodes, **options)` and its asyncio twins;
/// `function` names the call in the message about an unknown option.
pub(crate) fn client_builder(
    function: &str,
    nodes: &Bound<'_, PyAny>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<ClientBuilder> {
    let py = nodes.py();
    let given = ClientOptionArgs::collect(options, function)?;
    // The options of one Python type are checked first, in this order, as
    // when pyo3 converted them before the call.
    let key_prefix = typed::<String>(given.key_prefix, "key_prefix")?;
    let auto_renew = typed::<bool>(given.auto_renew, "auto_renew")?;
    let username = typed::<String>(given.username, "username")?;
    let password = typed::<String>(given.password, "password")?;
    let allow_mixed_tls = typed::<bool>(given.allow_mixed_tls, "allow_mixed_tls")?;

    // The nodes are read before the other options, as they always were.
    let node_urls = node_list(nodes)?;
    let mut settings = ClientSettings::default();
    settings.key_prefix = key_prefix;
    settings.node_timeout = opt_seconds(given.node_timeout.as_ref(), "node_timeout", false, Scope::Config)?;
    settings.connect_timeout = opt_seconds(
        given.connect_timeout.as_ref(),
        "connect_timeout",
        false,
        Scope::Config,
    )?;
    if let Some(d) = given.drift_factor {
        if d.is_instance_of::<PyBool>() {
            return Err(config(py, "drift_factor must be a number, not a bool"));
        }
        settings.drift_factor = Some(d.extract::<f64>()?);
    }
    if let Some(r) = given.retry {
        let (base, max): (Bound<'_, PyAny>, Bound<'_, PyAny>) = r.extract().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err("retry must be a (base_delay, max_delay) pair of seconds")
        })?;
        settings.retry_base_delay = Some(seconds(&base, "retry base_delay", false, Scope::Config)?);
        settings.retry_max_delay = Some(seconds(&max, "retry max_delay", false, Scope::Config)?);
    }
    settings.default_ttl = opt_seconds(given.default_ttl.as_ref(), "default_ttl", false, Scope::Config)?;
    settings.default_wait = opt_seconds(given.default_wait.as_ref(), "default_wait", true, Scope::Config)?;
    settings.auto_renew = auto_renew;
    settings.username = username;
    settings.password = password;
    if let Some(ca) = given.tls_ca_pem {
        settings.tls_ca_pem = Some(pem(&ca, "tls_ca_pem")?);
    }
    settings.tls_client_cert = match (given.tls_client_cert_pem, given.tls_client_key_pem) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some((
            pem(&cert, "tls_client_cert_pem")?,
            pem(&key, "tls_client_key_pem")?,
        )),
        _ => {
            return Err(config(
                py,
                "tls_client_cert_pem and tls_client_key_pem must be given together",
            ));
        }
    };
    if let Some(version) = given.tls_min_version {
        settings.tls_min_version = Some(tls_version(&version, "tls_min_version")?);
    }
    settings.allow_mixed_tls = allow_mixed_tls;
    Ok(ClientBuilder::default().nodes(node_urls).settings(settings))
}

/// What every `acquire`-like call takes, parsed: `resource`, `ttl`, `wait`
/// and the lock options.
pub(crate) struct AcquireArgs {
    pub(crate) resource: String,
    pub(crate) options: LockOptions,
    pub(crate) on_lost: Option<Py<PyAny>>,
}

impl AcquireArgs {
    /// Parses `acquire(resource, ttl=None, wait=None, **options)`, and
    /// `try_acquire` (`wait` None) and `lock`; `function` names the call in
    /// the message about an unknown option.
    pub(crate) fn parse(
        function: &str,
        resource: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let (resource, PermitArgs { options, on_lost }) =
            parse_lock_args(function, Some(resource), ttl, wait, options)?;
        Ok(AcquireArgs {
            resource: resource.unwrap_or_default(),
            options,
            on_lost,
        })
    }

    /// A copy (the callback reference is cloned with the GIL).
    pub(crate) fn clone_ref(&self, py: Python<'_>) -> Self {
        AcquireArgs {
            resource: self.resource.clone(),
            options: self.options.clone(),
            on_lost: self.on_lost.as_ref().map(|c| c.clone_ref(py)),
        }
    }
}

/// What the `acquire`-like calls of a semaphore or a read-write lock take,
/// parsed: `ttl`, `wait` and the lock options (the semaphore or read-write
/// lock names what is acquired).
pub(crate) struct PermitArgs {
    pub(crate) options: LockOptions,
    pub(crate) on_lost: Option<Py<PyAny>>,
}

impl PermitArgs {
    /// Parses `Semaphore.acquire(ttl=None, wait=None, **options)`, and
    /// `try_acquire` (`wait` None) and `permit`, and the read-write locks'
    /// `acquire_read`, `acquire_write`, `read`, `write` (as `acquire`) and
    /// `try_read`, `try_write` (as `try_acquire`), with the lock options and
    /// checks of `Client.acquire`.
    pub(crate) fn parse(
        function: &str,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        parse_lock_args(function, None, ttl, wait, options).map(|(_, args)| args)
    }

    /// A copy (the callback reference is cloned with the GIL).
    pub(crate) fn clone_ref(&self, py: Python<'_>) -> Self {
        PermitArgs {
            options: self.options.clone(),
            on_lost: self.on_lost.as_ref().map(|c| c.clone_ref(py)),
        }
    }
}

/// The lock options of every `acquire`-like call, and its `resource` when
/// it takes one, checked in the order pyo3 converted them as parameters.
fn parse_lock_args(
    function: &str,
    resource: Option<&Bound<'_, PyAny>>,
    ttl: Option<&Bound<'_, PyAny>>,
    wait: Option<&Bound<'_, PyAny>>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(Option<String>, PermitArgs)> {
    let given = LockOptionArgs::collect(options, function)?;
    // Checked before `resource`, as when pyo3 converted it before the call.
    let auto_renew = typed::<bool>(given.auto_renew, "auto_renew")?;
    let fair = typed::<bool>(given.fair, "fair")?;
    let resource = resource.map(resource_arg).transpose()?;

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
    if let Some(limit) = opt_seconds(given.max_hold.as_ref(), "max_hold", false, Scope::Call)? {
        options = options.max_hold(limit);
    }
    if let Some(count) = given.max_renewals {
        options = options.max_renewals(unsigned::<u32>(&count, "max_renewals")?);
    }
    if let Some(on) = fair {
        options = options.fair(on);
    }
    let on_lost = match given.on_lost {
        None => None,
        Some(callback) if callback.is_callable() => Some(callback.unbind()),
        Some(other) => {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "on_lost must be callable, not {}",
                other.get_type().name()?
            )));
        }
    };
    Ok((resource, PermitArgs { options, on_lost }))
}

/// The number of permits of `Client.semaphore(name, permits)`: an int (not
/// a bool). The core checks the range (1 to `MAX_PERMITS`); a number that
/// is not even a `u32` gets the core's message here.
pub(crate) fn permits_arg(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<u32> {
    let py = obj.py();
    if obj.is_instance_of::<PyBool>() {
        return Err(invalid(py, "permits must be an int, not a bool"));
    }
    let Ok(asked) = obj.extract::<i128>() else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "permits must be an int, not {}",
            obj.get_type().name()?
        )));
    };
    u32::try_from(asked).map_err(|_| {
        invalid(
            py,
            format!(
                "a semaphore has 1 to {} permits; {asked} were asked for semaphore '{name}'",
                fencelock::MAX_PERMITS
            ),
        )
    })
}

/// What `campaign(name, ttl=None, wait=None, value=None)` takes on both
/// clients, parsed. Unlike `acquire`, an unset `wait` waits until elected.
pub(crate) struct CampaignArgs {
    pub(crate) name: String,
    pub(crate) options: CampaignOptions,
}

impl CampaignArgs {
    /// Parses the arguments of `Client.campaign` and `AsyncClient.campaign`.
    /// The value's length is the core's to check (`InvalidArgumentError`).
    pub(crate) fn parse(
        name: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        value: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let name = election_arg(name)?;
        // Without a ttl the client's `default_ttl` applies, as for `acquire`.
        let mut options = CampaignOptions::default();
        if let Some(ttl) = opt_seconds(ttl, "ttl", false, Scope::Call)? {
            options = options.ttl(ttl);
        }
        if let Some(wait) = opt_seconds(wait, "wait", true, Scope::Call)? {
            options = options.wait(wait);
        }
        if let Some(value) = value.filter(|v| !v.is_none()) {
            options = options.value(leader_value(value)?);
        }
        Ok(CampaignArgs { name, options })
    }
}

/// The value a leader announces: bytes as they are, or text as UTF-8.
pub(crate) fn leader_value(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(bytes.as_bytes().to_vec());
    }
    if let Ok(text) = obj.cast::<PyString>() {
        return Ok(text.to_cow()?.as_bytes().to_vec());
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "value must be bytes or str (an address, an id), not {}",
        obj.get_type().name()?
    )))
}

/// The name of the election a `campaign` or `observe` call is about.
pub(crate) fn election_arg(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    text_arg(obj, "name")
}

/// A text argument (`resource`, `key`, `value`): `str` only.
pub(crate) fn text_arg(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    obj.extract::<String>().map_err(|_| {
        let kind = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".to_owned());
        pyo3::exceptions::PyTypeError::new_err(format!("{name} must be str, not {kind}"))
    })
}

/// The resource a lock call is about.
pub(crate) fn resource_arg(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    text_arg(obj, "resource")
}

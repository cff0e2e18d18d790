//! `fencelock_options`: client settings beyond the node list.

use std::ffi::c_char;

use fencelock::{ClientBuilder, RetryPolicy, TlsVersion};

use crate::args;
use crate::boundary::{Failure, FfiResult, boundary_status};
use crate::status::fencelock_status;

/// Client settings, filled in by the `fencelock_options_set_*` functions and
/// read by [`crate::fencelock_client_new`], which validates them all at once
/// (a setter never rejects a value for its range; the client does, with a
/// message that says what is wrong). A setter fails only for a NULL or
/// non-UTF-8 argument or an enum value this library does not define, and
/// then leaves every setting as it was.
///
/// Owned by the caller; freed with [`fencelock_options_free`] (the client
/// keeps its own copy, so free them right after `fencelock_client_new`).
/// Not thread-safe: do not set from two threads at once.
pub struct fencelock_options {
    pub(crate) builder: ClientBuilder,
}

/// Creates options with every default (key prefix `fencelock:`, per-node
/// timeout 100 ms, connect timeout 1 s, drift factor 0.01, auto-renew on).
///
/// `out` receives the new object on success (NULL → `FENCELOCK_STATUS_NULL_ARGUMENT`).
/// Never blocks.
///
/// # Safety
/// `out` is NULL or valid for one pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_new(out: *mut *mut fencelock_options) -> fencelock_status {
    boundary_status(|| {
        let out = args::out(out, "out")?;
        let options = fencelock_options {
            builder: ClientBuilder::default(),
        };
        // SAFETY: checked above.
        unsafe { args::give(out, options) };
        Ok(())
    })
}

/// Frees options. NULL is a no-op. Never blocks.
///
/// # Safety
/// `options` is NULL or from [`fencelock_options_new`], not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_free(options: *mut fencelock_options) {
    // SAFETY: per the contract.
    drop(unsafe { args::take(options) });
}

/// Reads the arguments with `parse`, then, only if they are all valid,
/// applies them to the builder inside `options` with `apply` (so a rejected
/// argument leaves every earlier setting in place).
///
/// # Safety
/// `options` is NULL or a live, exclusively used `fencelock_options`.
unsafe fn update<T>(
    options: *mut fencelock_options,
    parse: impl FnOnce() -> FfiResult<T>,
    apply: impl FnOnce(ClientBuilder, T) -> ClientBuilder,
) -> fencelock_status {
    boundary_status(|| {
        // SAFETY: per the contract.
        let options = unsafe { options.as_mut() }.ok_or_else(|| Failure::null("options"))?;
        let value = parse()?;
        options.builder = apply(std::mem::take(&mut options.builder), value);
        Ok(())
    })
}

/// Sets the prefix of every key (default `fencelock:`). `prefix` is copied.
///
/// # Safety
/// `options` is NULL or live; `prefix` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_set_key_prefix(
    options: *mut fencelock_options,
    prefix: *const c_char,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        update(
            options,
            || args::text(prefix, "prefix"),
            |b, prefix| b.key_prefix(prefix),
        )
    }
}

/// Sets the hard limit on each request to one node (default 100 ms; 0 is
/// rejected by `fencelock_client_new`).
///
/// # Safety
/// `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_set_node_timeout_ms(
    options: *mut fencelock_options,
    timeout_ms: u64,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { update(options, || Ok(args::millis(timeout_ms)), |b, t| b.node_timeout(t)) }
}

/// Sets the limit on opening a connection to one node (default 1000 ms).
///
/// # Safety
/// `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_set_connect_timeout_ms(
    options: *mut fencelock_options,
    timeout_ms: u64,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        update(
            options,
            || Ok(args::millis(timeout_ms)),
            |b, t| b.connect_timeout(t),
        )
    }
}

/// Sets the clock-drift factor subtracted from a lock's validity (default
/// 0.01; 0 to 0.1 accepted, NaN rejected by `fencelock_client_new`).
///
/// # Safety
/// `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_set_drift_factor(
    options: *mut fencelock_options,
    factor: f64,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { update(options, || Ok(factor), |b, factor| b.drift_factor(factor)) }
}

/// Sets the backoff between attempts while waiting: full jitter, starting
/// from `base_ms` and doubling up to `max_ms`.
///
/// # Safety
/// `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_set_retry_ms(
    options: *mut fencelock_options,
    base_ms: u64,
    max_ms: u64,
) -> fencelock_status {
    let policy = RetryPolicy::new(args::millis(base_ms), args::millis(max_ms));
    // SAFETY: per the contract.
    unsafe { update(options, || Ok(policy), |b, policy| b.retry(policy)) }
}

/// Turns automatic renewal of acquired locks on (default) or off.
///
/// # Safety
/// `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_set_auto_renew(
    options: *mut fencelock_options,
    auto_renew: bool,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { update(options, || Ok(auto_renew), |b, on| b.default_auto_renew(on)) }
}

/// Sets the ACL user name (NULL: none, i.e. `default`) and password (NULL:
/// none) used on every node; both are copied. They override credentials in
/// the URLs and never appear in logs or error messages.
///
/// # Safety
/// `options` is NULL or live; `username` and `password` are NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_set_credentials(
    options: *mut fencelock_options,
    username: *const c_char,
    password: *const c_char,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        update(
            options,
            || {
                Ok((
                    args::optional_text(username, "username")?,
                    args::optional_text(password, "password")?,
                ))
            },
            |mut b, (username, password)| {
                if let Some(user) = username {
                    b = b.username(user);
                }
                if let Some(password) = password {
                    b = b.password(password);
                }
                b
            },
        )
    }
}

/// Trusts this PEM-encoded CA bundle (instead of the built-in Mozilla roots)
/// for `rediss://` nodes. The bytes are copied.
///
/// # Safety
/// `options` is NULL or live; `pem` is NULL or valid for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_set_tls_ca_pem(
    options: *mut fencelock_options,
    pem: *const u8,
    len: usize,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        update(
            options,
            || args::bytes(pem, len, "pem"),
            |b, pem| b.tls_ca_pem(pem),
        )
    }
}

/// Presents this PEM certificate chain and private key to `rediss://`
/// nodes that require client certificates. The bytes are copied.
///
/// # Safety
/// `options` is NULL or live; `cert`/`key` are NULL or valid for their lengths.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_set_tls_client_cert_pem(
    options: *mut fencelock_options,
    cert: *const u8,
    cert_len: usize,
    key: *const u8,
    key_len: usize,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        update(
            options,
            || {
                Ok((
                    args::bytes(cert, cert_len, "cert")?,
                    args::bytes(key, key_len, "key")?,
                ))
            },
            |b, (cert, key)| b.tls_client_cert_pem(cert, key),
        )
    }
}

/// A TLS protocol version, for [`fencelock_options_set_tls_min_version`].
/// The values are stable: 10 times the major version plus the minor one.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum fencelock_tls_version {
    /// TLS 1.2 (and 1.3): the default. Older versions are never spoken.
    FENCELOCK_TLS_VERSION_1_2 = 12,
    /// TLS 1.3 only.
    FENCELOCK_TLS_VERSION_1_3 = 13,
}

impl fencelock_tls_version {
    /// The version whose value is `value`, if this library defines one.
    fn from_value(value: i32) -> FfiResult<TlsVersion> {
        use fencelock_tls_version::*;
        match value {
            v if v == FENCELOCK_TLS_VERSION_1_2 as i32 => Ok(TlsVersion::V1_2),
            v if v == FENCELOCK_TLS_VERSION_1_3 as i32 => Ok(TlsVersion::V1_3),
            other => Err(Failure::invalid(format!(
                "argument `version` is {other}, not a fencelock_tls_version; pass \
                 FENCELOCK_TLS_VERSION_1_2 (12) or FENCELOCK_TLS_VERSION_1_3 (13)"
            ))),
        }
    }
}

/// Sets the oldest TLS version accepted from `rediss://` nodes (default
/// `FENCELOCK_TLS_VERSION_1_2`; TLS 1.0 and 1.1 are never spoken). With
/// `FENCELOCK_TLS_VERSION_1_3`, a node that offers only TLS 1.2 fails with
/// `FENCELOCK_STATUS_TLS`. Not available for `rediss+cluster://` nodes: with
/// a 1.3 minimum, `fencelock_client_new` refuses them with
/// `FENCELOCK_STATUS_CONFIG` (restrict those with the servers' `tls-protocols`).
///
/// `version` is a `fencelock_tls_version` value, taken as `int32_t` so that
/// any integer is safe to pass: one this library does not define returns
/// `FENCELOCK_STATUS_INVALID_ARGUMENT` and changes nothing. Never blocks.
///
/// # Safety
/// `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_options_set_tls_min_version(
    options: *mut fencelock_options,
    version: i32,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        update(
            options,
            || fencelock_tls_version::from_value(version),
            |b, version| b.tls_min_version(version),
        )
    }
}

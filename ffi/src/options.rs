//! `fencelock_options`: client settings beyond the node list.

use std::ffi::c_char;

use fencelock_core::{ClientBuilder, RetryPolicy};

use crate::args;
use crate::boundary::{FfiResult, boundary_status};
use crate::status::fencelock_status;

/// Client settings, filled in by the `fencelock_options_set_*` functions and
/// read by [`crate::fencelock_client_new`], which validates them all at once
/// (a setter never rejects a value for its range; the client does, with a
/// message that says what is wrong).
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

/// Runs `change` on the builder inside `options`.
///
/// # Safety
/// `options` is NULL or a live, exclusively used `fencelock_options`.
unsafe fn update(
    options: *mut fencelock_options,
    change: impl FnOnce(ClientBuilder) -> FfiResult<ClientBuilder>,
) -> fencelock_status {
    boundary_status(|| {
        // SAFETY: per the contract.
        let options = unsafe { options.as_mut() }.ok_or_else(|| crate::boundary::Failure::null("options"))?;
        options.builder = change(std::mem::take(&mut options.builder))?;
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
    unsafe { update(options, |b| Ok(b.key_prefix(args::text(prefix, "prefix")?))) }
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
    unsafe { update(options, |b| Ok(b.node_timeout(args::millis(timeout_ms)))) }
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
    unsafe { update(options, |b| Ok(b.connect_timeout(args::millis(timeout_ms)))) }
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
    unsafe { update(options, |b| Ok(b.drift_factor(factor))) }
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
    unsafe { update(options, |b| Ok(b.retry(policy))) }
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
    unsafe { update(options, |b| Ok(b.default_auto_renew(auto_renew))) }
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
        update(options, |mut b| {
            if let Some(user) = args::optional_text(username, "username")? {
                b = b.username(user);
            }
            if let Some(password) = args::optional_text(password, "password")? {
                b = b.password(password);
            }
            Ok(b)
        })
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
    unsafe { update(options, |b| Ok(b.tls_ca_pem(args::bytes(pem, len, "pem")?))) }
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
        update(options, |b| {
            Ok(b.tls_client_cert_pem(
                args::bytes(cert, cert_len, "cert")?,
                args::bytes(key, key_len, "key")?,
            ))
        })
    }
}

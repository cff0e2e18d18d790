//! Fenced writes: storage that refuses a write carrying an older token.

use std::ffi::{CString, c_char};

use crate::args;
use crate::boundary::boundary;
use crate::client::fencelock_client;
use crate::error::{c_string, fencelock_error};
use crate::status::fencelock_status;

/// Writes `value` to the Redis key `key` only if `fencing_token` is at least
/// the token of the last write to it (docs/protocol.md, FENCED_SET), so a
/// paused former holder cannot overwrite newer data.
///
/// Statuses: `OK`; `STALE_TOKEN` (a newer holder already wrote: stop);
/// `UNAVAILABLE`; `INVALID_ARGUMENT`, `INVALID_UTF8`, `NULL_ARGUMENT`.
/// `key` and `value` are NUL-terminated UTF-8, borrowed for the call.
///
/// Blocks for one round trip per node. Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `key`/`value` are NULL or NUL-terminated;
/// `error` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_fenced_set(
    client: *const fencelock_client,
    key: *const c_char,
    value: *const c_char,
    fencing_token: u64,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let client = args::object(client, "client")?.inner.clone();
            let key = args::text(key, "key")?.to_owned();
            let value = args::text(value, "value")?.to_owned();
            let write = async move { client.fenced_set(&key, &value, fencing_token).await };
            Ok(fencelock_core::block_on(write)??)
        })
    }
}

/// Reads a value written by [`fencelock_fenced_set`] and the token that wrote it.
///
/// On `OK`, `*value_out` receives a new NUL-terminated string the caller
/// frees with [`fencelock_string_free`] (NULL when the key does not exist)
/// and `*token_out` the token (0 when absent). Blocks for one round trip.
/// Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `key` is NULL or NUL-terminated; the
/// out-pointers are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_fenced_get(
    client: *const fencelock_client,
    key: *const c_char,
    value_out: *mut *mut c_char,
    token_out: *mut u64,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let client = args::object(client, "client")?.inner.clone();
            let key = args::text(key, "key")?.to_owned();
            let value_out = args::out(value_out, "value_out")?;
            let token_out = args::out(token_out, "token_out")?;
            let read = async move { client.fenced_get(&key).await };
            let (value, token) = match fencelock_core::block_on(read)?? {
                Some((value, token)) => (c_string(value).into_raw(), token),
                None => (std::ptr::null_mut(), 0),
            };
            value_out.write(value);
            token_out.write(token);
            Ok(())
        })
    }
}

/// Frees a string this library returned as the caller's. NULL is a no-op.
///
/// # Safety
/// `string` is NULL or a string from this library documented as the
/// caller's to free, not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_string_free(string: *mut c_char) {
    if !string.is_null() {
        // SAFETY: made by `CString::into_raw` in this library.
        drop(unsafe { CString::from_raw(string) });
    }
}

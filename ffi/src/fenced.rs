//! Fenced writes: storage that refuses a write carrying an older token, or
//! an equal token from another grant.

use std::ffi::{CString, c_char, c_void};

use crate::args;
use crate::boundary::{Failure, FfiResult, boundary};
use crate::client::fencelock_client;
use crate::dispatch::UserData;
use crate::error::fencelock_error;
use crate::fence::fencelock_fence;
use crate::limits::FENCELOCK_MAX_HOLDER_ID;
use crate::operation::{fencelock_done_callback, fencelock_operation, into_status, start, start_done};
use crate::status::fencelock_status;

/// Writes `value` to the Redis key `key` only if `fencing_token` is larger
/// than the token of the last write to it (docs/protocol.md, FENCED_SET), so
/// a paused former holder cannot overwrite newer data. A bare token cannot
/// prove it comes from the grant that wrote last, so an equal token is
/// refused: to write again with the same token, use
/// [`fencelock_fenced_set_fence`] with the lock's fence.
///
/// Statuses: `OK`; `STALE_TOKEN` (a newer holder already wrote: stop);
/// `UNAVAILABLE`; `INVALID_ARGUMENT` (also for a key of the form of a lock
/// key, `<prefix>{…`), `INVALID_UTF8`, `NULL_ARGUMENT`.
/// `key` and `value` are NUL-terminated UTF-8, borrowed for the call.
///
/// Blocks for one round trip. Thread-safe.
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
    let fence = fencelock_fence {
        token: fencing_token,
        holder: 0,
    };
    // SAFETY: per the contract, which is this function's.
    unsafe { fencelock_fenced_set_fence(client, key, value, fence, error) }
}

/// Writes `value` to the Redis key `key` only if `fence` is newer than the
/// last write's: a larger token, or the same token from the same grant
/// (`holder` equal and not 0). Pass the lock's fence
/// ([`crate::fencelock_lock_fence`]): one holder may write repeatedly, and
/// a second holder that got the same token (after a node lost its counter,
/// docs/protocol.md §5) is refused.
///
/// Statuses: as [`fencelock_fenced_set`]; `INVALID_ARGUMENT` also for a
/// holder above `FENCELOCK_MAX_HOLDER_ID`. Blocks for one round trip.
/// Thread-safe.
///
/// # Safety
/// As [`fencelock_fenced_set`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_fenced_set_fence(
    client: *const fencelock_client,
    key: *const c_char,
    value: *const c_char,
    fence: fencelock_fence,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let write = fenced_write(client, key, value, fence)?;
            Ok(fencelock::block_on(write)??)
        })
    }
}

/// Writes like [`fencelock_fenced_set_fence`] without blocking: returns at
/// once, and `callback` gets the outcome exactly once on fencelock's callback
/// thread. Other arguments as [`crate::fencelock_lock_release_async`]
/// (`operation_out` may be NULL; [`crate::fencelock_operation_cancel`] stops a
/// write not yet sent). Arguments are checked before anything starts: on an
/// error status the callback is never called. Never blocks. Thread-safe.
///
/// # Safety
/// As [`fencelock_fenced_set`]; `callback` is a function with this
/// signature; `operation_out` is NULL or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn fencelock_fenced_set_async(
    client: *const fencelock_client,
    key: *const c_char,
    value: *const c_char,
    fence: fencelock_fence,
    callback: fencelock_done_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let write = fenced_write(client, key, value, fence)?;
            start_done(write, callback, user_data, operation_out)
        })
    }
}

/// The checked arguments of a fenced write, as the write to run.
///
/// # Safety
/// `client` is NULL or live; `key` and `value` are NULL or NUL-terminated.
unsafe fn fenced_write(
    client: *const fencelock_client,
    key: *const c_char,
    value: *const c_char,
    fence: fencelock_fence,
) -> FfiResult<impl Future<Output = fencelock::Result<()>> + Send + 'static> {
    // SAFETY: per the contract.
    let (client, key, value) = unsafe {
        (
            args::object(client, "client")?.inner.clone(),
            args::text(key, "key")?.to_owned(),
            args::text(value, "value")?.to_owned(),
        )
    };
    if fence.holder > FENCELOCK_MAX_HOLDER_ID {
        return Err(Failure::invalid(format!(
            "holder {} is above FENCELOCK_MAX_HOLDER_ID ({FENCELOCK_MAX_HOLDER_ID})",
            fence.holder
        )));
    }
    let fence = fencelock::Fence {
        token: fence.token,
        holder: fence.holder,
    };
    Ok(async move { client.fenced_set(&key, &value, fence).await })
}

/// Reads a value written by [`fencelock_fenced_set`] and the token that wrote it.
///
/// On `OK`, `*value_out` receives a new NUL-terminated string the caller
/// frees with [`fencelock_string_free`] (NULL when the key does not exist)
/// and `*token_out` the token (0 when absent). A value holding a NUL byte
/// (another front may write one) is `INVALID_ARGUMENT`: a C string cannot
/// carry it, and it is never cut short or altered. Blocks for one round trip;
/// use [`fencelock_fenced_get_async`] not to block. Thread-safe.
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
            let (value, token) = match fencelock::block_on(read_value(client, key))?? {
                Some((value, token)) => (value.into_raw(), token),
                None => (std::ptr::null_mut(), 0),
            };
            value_out.write(value);
            token_out.write(token);
            Ok(())
        })
    }
}

/// Called once when a [`fencelock_fenced_get_async`] ends, on fencelock's
/// callback thread. On `FENCELOCK_STATUS_OK`, `value` is the stored value as
/// a new NUL-terminated string, the callback's to free with
/// [`fencelock_string_free`] (now or later, from any thread), or NULL when
/// the key does not exist; `token` is the token that wrote it (0 when
/// absent), and `error` is NULL. Otherwise `value` is NULL, `token` 0, and
/// `error` (the callback's to free) says why (`CANCELLED` after
/// `fencelock_operation_cancel`). Same rules as
/// [`crate::fencelock_acquire_callback`].
pub type fencelock_fenced_value_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: fencelock_status,
        value: *mut c_char,
        token: u64,
        error: *mut fencelock_error,
    ),
>;

/// Starts [`fencelock_fenced_get`] and returns at once; `callback` gets the
/// value and its token, or the failure, exactly once on fencelock's callback
/// thread, possibly before this function returns.
///
/// `operation_out`, `user_data` and the returned status as
/// [`crate::fencelock_acquire_async`]: a NULL `client`, `key` or `callback`
/// (`NULL_ARGUMENT`) or a key that is not UTF-8 (`INVALID_UTF8`) fails this
/// call, and the callback is then never called; a key the read refuses
/// (empty, too long, of a lock key's form) is reported to the callback
/// (`INVALID_ARGUMENT`), as [`fencelock_fenced_set_async`] does, and so is
/// a value holding a NUL byte (see [`fencelock_fenced_get`]).
/// [`crate::fencelock_operation_cancel`] stops a read in flight: the
/// callback then gets `CANCELLED`. Never blocks. Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `key` is NULL or NUL-terminated; `callback` is
/// NULL or a function of that type; `operation_out` and `error` are NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_fenced_get_async(
    client: *const fencelock_client,
    key: *const c_char,
    callback: fencelock_fenced_value_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let client = args::object(client, "client")?.inner.clone();
            let key = args::text(key, "key")?.to_owned();
            let callback = callback.ok_or_else(|| Failure::null("callback"))?;
            start(
                read_value(client, key),
                deliver_value(callback, UserData(user_data)),
                operation_out,
            )
        })
    }
}

/// The read of both `fencelock_fenced_get` forms: the value as a C string
/// and its token, or `None` when the key does not exist.
async fn read_value(client: fencelock::Client, key: String) -> FfiResult<Option<(CString, u64)>> {
    match client.fenced_get(&key).await? {
        Some((value, token)) => Ok(Some((value_string(&key, value)?, token))),
        None => Ok(None),
    }
}

/// A fenced value as a C string; one holding a NUL byte (another front may
/// write one) is refused, never cut short or altered.
fn value_string(key: &str, value: String) -> FfiResult<CString> {
    CString::new(value).map_err(|_| {
        Failure::invalid(format!(
            "the value of fenced key {key:?} holds a NUL byte, which a C string cannot carry; \
             it was written by another front: write it without NUL bytes to read it from C"
        ))
    })
}

/// What ends a [`fencelock_fenced_get_async`]: hands the value (the
/// callback's to free) and its token, or the failure, to `callback`.
fn deliver_value(
    callback: unsafe extern "C" fn(*mut c_void, fencelock_status, *mut c_char, u64, *mut fencelock_error),
    user_data: UserData,
) -> impl FnOnce(FfiResult<Option<(CString, u64)>>) + Send + 'static {
    move |result| {
        let (value, token, result) = match result {
            Ok(Some((value, token))) => (value.into_raw(), token, Ok(())),
            Ok(None) => (std::ptr::null_mut(), 0, Ok(())),
            Err(failure) => (std::ptr::null_mut(), 0, Err(failure)),
        };
        let (status, error) = into_status(result);
        // SAFETY: the caller's callback, called once with what it documents.
        unsafe { callback(user_data.get(), status, value, token, error) };
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

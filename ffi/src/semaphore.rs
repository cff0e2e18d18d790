//! Counting semaphores for C: a semaphore of `permits` permits admits at
//! most that many holders at once, and each permit is handed out as a
//! `fencelock_lock` on the semaphore's name (its own lease, renewal, fencing
//! token and loss reporting; releasing it frees the permit for the next
//! waiter). There is no semaphore object: every call names the semaphore and
//! its number of permits, which all its users must agree on.

use std::ffi::{c_char, c_void};

use fencelock::{Client, LockOptions, Semaphore};

use crate::args;
use crate::boundary::{Failure, FfiResult, boundary, run_caught};
use crate::client::fencelock_client;
use crate::dispatch::UserData;
use crate::error::fencelock_error;
use crate::lock::{fencelock_lock, lock_options};
use crate::lock_options::fencelock_lock_options;
use crate::operation::{
    fencelock_acquire_callback, fencelock_operation, into_status, start, start_acquire_work,
};
use crate::status::fencelock_status;

/// The semaphore `name` of `permits` permits on `client`'s nodes (no I/O).
///
/// # Safety
/// `name` is NULL or NUL-terminated.
unsafe fn semaphore(client: &fencelock_client, name: *const c_char, permits: u32) -> FfiResult<Semaphore> {
    // SAFETY: per the contract.
    let name = unsafe { args::text(name, "name") }?;
    Ok(client.inner.semaphore(name, permits)?)
}

/// Takes a permit of the semaphore `name`, waiting (woken when a holder
/// releases, as a lock's waiters are) for up to `wait_ms` while all
/// `permits` are held. The permit lives `ttl_ms` on Redis and is renewed
/// automatically until released (unless auto-renew is off).
///
/// * `name`: NUL-terminated UTF-8, 1 to `FENCELOCK_MAX_RESOURCE_BYTES`
///   bytes, borrowed for the call. A semaphore's keys never collide with a
///   lock's or an election's of the same name.
/// * `permits`: how many holders the semaphore admits at once, 1 to
///   `FENCELOCK_MAX_PERMITS`. Every user of the semaphore must pass the same
///   number while it is in use.
/// * `ttl_ms`, `wait_ms`: as [`crate::fencelock_acquire`]
///   (`FENCELOCK_MAX_WAIT_MS` to wait as long as allowed, 0 for one attempt).
/// * `out`: receives the permit on success only: a `fencelock_lock` whose
///   resource is `name`, which [`fencelock_lock_permit`] says is permit
///   number 0 to `permits - 1`. Extend, release (which frees the permit for
///   the next waiter), its fencing token, lost callback and events work as
///   for any lock. Free it with `fencelock_lock_free`.
/// * `error`: NULL, or receives detail on failure (node by node).
///
/// Statuses as [`crate::fencelock_acquire`]: `TIMEOUT` (every permit held
/// for all of `wait_ms`), `NOT_ACQUIRED` (every permit held and `wait_ms`
/// is 0), `UNAVAILABLE`, `INVALID_UTF8`, `NULL_ARGUMENT`, `CLOSED`,
/// `WOULD_BLOCK`; `INVALID_ARGUMENT` for a bad name, ttl or wait, `permits`
/// 0 or above `FENCELOCK_MAX_PERMITS`, and when the nodes hold this
/// semaphore with another number of permits (the message says "has N
/// permits").
///
/// Blocks up to about `wait_ms` plus one attempt (bounded by the per-node
/// timeout); use [`fencelock_semaphore_acquire_async`] not to block.
/// Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `name` is NULL or NUL-terminated; `out` and
/// `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_semaphore_acquire(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    ttl_ms: u64,
    wait_ms: u64,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            acquire(client, name, permits, lock_options(ttl_ms, wait_ms), out)
        })
    }
}

/// Takes a permit as [`fencelock_semaphore_acquire`] does, with the ttl,
/// wait, auto-renew, renewal caps and fair waiting of `options` (which the
/// call copies: free or reuse them right after). Fair: the acquire never
/// takes a free permit ahead of an earlier waiter of the semaphore.
///
/// Statuses, blocking and threading as [`fencelock_semaphore_acquire`];
/// `INVALID_ARGUMENT` also for an option out of range.
///
/// # Safety
/// As [`fencelock_semaphore_acquire`]; `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_semaphore_acquire_with(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    options: *const fencelock_lock_options,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let options = args::object(options, "options")?.options.clone();
            acquire(client, name, permits, options, out)
        })
    }
}

/// One attempt to take a permit for `ttl_ms`: as
/// [`fencelock_semaphore_acquire`] with no wait; `NOT_ACQUIRED` when every
/// permit is held.
///
/// Blocks for one attempt (at most about the per-node timeout). Thread-safe.
///
/// # Safety
/// As [`fencelock_semaphore_acquire`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_semaphore_try_acquire(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    ttl_ms: u64,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { fencelock_semaphore_acquire(client, name, permits, ttl_ms, 0, out, error) }
}

/// The blocking acquire behind [`fencelock_semaphore_acquire`] and
/// [`fencelock_semaphore_acquire_with`].
///
/// # Safety
/// As [`fencelock_semaphore_acquire`].
unsafe fn acquire(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    options: LockOptions,
    out: *mut *mut fencelock_lock,
) -> FfiResult {
    // SAFETY: per the contract.
    unsafe {
        let client = args::object(client, "client")?;
        let semaphore = semaphore(client, name, permits)?;
        let out = args::out(out, "out")?;
        let permit = fencelock::block_on(async move { semaphore.acquire(options).await })??;
        args::give(out, fencelock_lock::new(permit, &client.events)?);
    }
    Ok(())
}

/// Starts taking a permit of the semaphore `name` (as
/// [`fencelock_semaphore_acquire`], `wait_ms` 0 for one attempt) and
/// returns at once; `callback` gets the permit (a `fencelock_lock`, the
/// callback's to free) or the failure exactly once, on fencelock's callback
/// thread, possibly before this function returns.
///
/// `operation_out`, `user_data` and the returned status as
/// [`crate::fencelock_acquire_async`]: a bad name, `permits`, ttl or wait
/// fails this call (`INVALID_ARGUMENT`…) and the callback is never called.
/// A semaphore held elsewhere with another number of permits is reported to
/// the callback (`INVALID_ARGUMENT`, "has N permits"). Cancelling the
/// operation stops the wait and undoes any partial grant. Never blocks.
/// Thread-safe.
///
/// # Safety
/// As [`fencelock_semaphore_acquire`]; `callback` is NULL or a function of
/// that type; `operation_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_semaphore_acquire_async(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    ttl_ms: u64,
    wait_ms: u64,
    callback: fencelock_acquire_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let options = lock_options(ttl_ms, wait_ms);
            start_acquire(client, name, permits, options, callback, user_data, operation_out)
        })
    }
}

/// Starts taking a permit as [`fencelock_semaphore_acquire_async`] does,
/// with the options of `options` (copied: free or reuse them right after).
/// Statuses, callback and threading as [`fencelock_semaphore_acquire_async`].
/// Never blocks.
///
/// # Safety
/// As [`fencelock_semaphore_acquire_async`]; `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_semaphore_acquire_with_async(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    options: *const fencelock_lock_options,
    callback: fencelock_acquire_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let options = args::object(options, "options")?.options.clone();
            start_acquire(client, name, permits, options, callback, user_data, operation_out)
        })
    }
}

/// The start of [`fencelock_semaphore_acquire_async`] and
/// [`fencelock_semaphore_acquire_with_async`].
///
/// # Safety
/// As [`fencelock_semaphore_acquire_async`].
unsafe fn start_acquire(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    options: LockOptions,
    callback: fencelock_acquire_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
) -> FfiResult {
    // SAFETY: per the contract.
    unsafe {
        let client = args::object(client, "client")?;
        let semaphore = semaphore(client, name, permits)?;
        let callback = callback.ok_or_else(|| Failure::null("callback"))?;
        // Bad arguments fail the call itself, as in the blocking variant.
        check_options(&client.inner, &semaphore, &options)?;
        let work = async move { semaphore.acquire(options).await };
        start_acquire_work(work, &client.events, callback, user_data, operation_out)
    }
}

/// Checks a permit request's ttl and wait without any I/O.
fn check_options(client: &Client, semaphore: &Semaphore, options: &LockOptions) -> FfiResult {
    // The name was checked by `Client::semaphore`, by the rule of a resource.
    Ok(client.check_request(semaphore.name(), options)?)
}

/// Writes to `holders` how many permits of the semaphore `name` are held
/// now: those held on a majority of the nodes (a permit being handed to a
/// waiter is not counted). For monitoring: the answer may be out of date
/// when it arrives. `permits` as [`fencelock_semaphore_acquire`] (the count
/// looks at permits 0 to `permits - 1`).
///
/// Statuses: `OK`; `UNAVAILABLE` (no majority of nodes answered);
/// `INVALID_ARGUMENT` (bad name, `permits` 0 or above
/// `FENCELOCK_MAX_PERMITS`); `INVALID_UTF8`; `NULL_ARGUMENT`; `CLOSED`;
/// `WOULD_BLOCK` (on a thread of an async runtime).
///
/// Blocks for one round trip to the nodes (bounded by the connect timeout).
/// Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `name` is NULL or NUL-terminated; `holders`
/// and `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_semaphore_holders(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    holders: *mut usize,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let client = args::object(client, "client")?;
            let semaphore = semaphore(client, name, permits)?;
            let holders = args::out(holders, "holders")?;
            let count = fencelock::block_on(async move { semaphore.holders().await })??;
            holders.write(count);
            Ok(())
        })
    }
}

/// Called once when a [`fencelock_semaphore_holders_async`] ends, on
/// fencelock's callback thread: on `FENCELOCK_STATUS_OK`, `holders` is the
/// count and `error` is NULL; otherwise `holders` is 0 and `error` (the
/// callback's to free) says why (`CANCELLED` after
/// `fencelock_operation_cancel`). Same rules as
/// [`crate::fencelock_acquire_callback`].
pub type fencelock_holders_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: fencelock_status,
        holders: usize,
        error: *mut fencelock_error,
    ),
>;

/// Starts [`fencelock_semaphore_holders`] and returns at once; `callback`
/// gets the count or the failure exactly once, on fencelock's callback
/// thread, possibly before this function returns.
///
/// `operation_out`, `user_data` and the returned status as
/// [`crate::fencelock_acquire_async`]: a bad name or `permits` fails this
/// call (`INVALID_ARGUMENT`…), as does a NULL `client`, `name` or
/// `callback`, and the callback is then never called.
/// [`crate::fencelock_operation_cancel`] stops a count in flight: the
/// callback then gets `CANCELLED`. Never blocks. Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `name` is NULL or NUL-terminated; `callback`
/// is NULL or a function of that type; `operation_out` and `error` are NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_semaphore_holders_async(
    client: *const fencelock_client,
    name: *const c_char,
    permits: u32,
    callback: fencelock_holders_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let client = args::object(client, "client")?;
            let semaphore = semaphore(client, name, permits)?;
            let callback = callback.ok_or_else(|| Failure::null("callback"))?;
            let work = async move { Ok(semaphore.holders().await?) };
            start(
                work,
                deliver_holders(callback, UserData(user_data)),
                operation_out,
            )
        })
    }
}

/// What ends a [`fencelock_semaphore_holders_async`]: hands the count (0 on
/// failure) and the failure, if any, to `callback`.
fn deliver_holders(
    callback: unsafe extern "C" fn(*mut c_void, fencelock_status, usize, *mut fencelock_error),
    user_data: UserData,
) -> impl FnOnce(FfiResult<usize>) + Send + 'static {
    move |result| {
        let (holders, result) = match result {
            Ok(count) => (count, Ok(())),
            Err(failure) => (0, Err(failure)),
        };
        let (status, error) = into_status(result);
        // SAFETY: the caller's callback, called once with what it documents.
        unsafe { callback(user_data.get(), status, holders, error) };
    }
}

/// Whether `lock` is a semaphore's permit (from
/// [`fencelock_semaphore_acquire`] or its variants): true, and `*permit`
/// receives its number (0 to the semaphore's `permits - 1`; two holders of
/// one semaphore at once never have the same number); false for a lock, a
/// leadership, or a NULL `lock`, and `*permit` is left alone. `permit` may
/// be NULL to ask only whether. Still answers after the permit was released
/// or lost.
///
/// Never blocks; thread-safe.
///
/// # Safety
/// `lock` is NULL or live; `permit` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_permit(lock: *const fencelock_lock, permit: *mut u32) -> bool {
    let read = run_caught(|| {
        // SAFETY: per the contract.
        let Some(lock) = (unsafe { lock.as_ref() }) else {
            return Ok(None);
        };
        Ok(lock.inner.permit())
    });
    match read {
        Ok(Some(number)) => {
            if !permit.is_null() {
                // SAFETY: non-NULL and writable per the contract.
                unsafe { permit.write(number) };
            }
            true
        }
        _ => false,
    }
}

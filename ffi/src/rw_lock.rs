//! Read-write locks for C: any number of readers at once, or one writer.
//! Each read or write grant is handed out as a `fencelock_lock` on the
//! read-write lock's name (its own lease, renewal, fencing token and loss
//! reporting; releasing it lets the next waiters in). There is no read-write
//! lock object: every call names the lock.

use std::ffi::{c_char, c_void};

use fencelock::{Client, Lock, LockOptions, RwLock};

use crate::args;
use crate::boundary::{Failure, FfiResult, boundary};
use crate::client::fencelock_client;
use crate::error::fencelock_error;
use crate::lock::{fencelock_lock, lock_options};
use crate::lock_options::fencelock_lock_options;
use crate::operation::{fencelock_acquire_callback, fencelock_operation, start_acquire_work};
use crate::status::fencelock_status;

/// Which side of a read-write lock a call takes.
#[derive(Clone, Copy)]
enum Side {
    Read,
    Write,
}

impl Side {
    /// Takes this side of `rw` with `options` (the work of every acquire here).
    async fn take(self, rw: RwLock, options: LockOptions) -> fencelock::Result<Lock> {
        match self {
            Side::Read => rw.read(options).await,
            Side::Write => rw.write(options).await,
        }
    }
}

/// The read-write lock `name` on `client`'s nodes (no I/O).
///
/// # Safety
/// `name` is NULL or NUL-terminated.
unsafe fn rw_lock(client: &fencelock_client, name: *const c_char) -> FfiResult<RwLock> {
    // SAFETY: per the contract.
    let name = unsafe { args::text(name, "name") }?;
    Ok(client.inner.rw_lock(name)?)
}

/// Takes the read-write lock `name` for reading, beside any other readers,
/// waiting (woken when a writer releases, as a lock's waiters are) for up to
/// `wait_ms` while a writer holds it or a writer waits ahead of this call:
/// once a writer waits, readers that ask later queue behind it, so a stream
/// of readers never starves a writer. The grant lives `ttl_ms` on Redis and
/// is renewed automatically until released (unless auto-renew is off).
///
/// * `name`: NUL-terminated UTF-8, 1 to `FENCELOCK_MAX_RESOURCE_BYTES`
///   bytes, borrowed for the call. A read-write lock's keys never collide
///   with a lock's, a semaphore's or an election's of the same name.
/// * `ttl_ms`, `wait_ms`: as [`crate::fencelock_acquire`]
///   (`FENCELOCK_MAX_WAIT_MS` to wait as long as allowed, 0 for one attempt).
/// * `out`: receives the read grant on success only: a `fencelock_lock`
///   whose resource is `name`, with its own lease (a reader that dies frees
///   itself at its ttl, whatever the other readers do). Extend, release
///   (the last reader's release lets a waiting writer in), its fencing token,
///   lost callback and events work as for any lock. Free it with
///   `fencelock_lock_free`.
/// * `error`: NULL, or receives detail on failure (node by node).
///
/// Statuses as [`crate::fencelock_acquire`]: `TIMEOUT` (a writer held or
/// waited ahead for all of `wait_ms`), `NOT_ACQUIRED` (the same with
/// `wait_ms` 0), `UNAVAILABLE`, `INVALID_ARGUMENT` (bad name, ttl or wait),
/// `INVALID_UTF8`, `NULL_ARGUMENT`, `CLOSED`, `WOULD_BLOCK`.
///
/// Blocks up to about `wait_ms` plus one attempt (bounded by the per-node
/// timeout); use [`fencelock_rw_read_async`] not to block. Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `name` is NULL or NUL-terminated; `out` and
/// `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_rw_read(
    client: *const fencelock_client,
    name: *const c_char,
    ttl_ms: u64,
    wait_ms: u64,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            acquire(Side::Read, client, name, lock_options(ttl_ms, wait_ms), out)
        })
    }
}

/// Takes the lock for reading as [`fencelock_rw_read`] does, with the ttl,
/// wait, auto-renew, renewal caps and fair waiting of `options` (which the
/// call copies: free or reuse them right after). Fair: the reader never
/// goes ahead of an earlier waiter of the lock, reader or writer.
///
/// Statuses, blocking and threading as [`fencelock_rw_read`];
/// `INVALID_ARGUMENT` also for an option out of range.
///
/// # Safety
/// As [`fencelock_rw_read`]; `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_rw_read_with(
    client: *const fencelock_client,
    name: *const c_char,
    options: *const fencelock_lock_options,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let options = args::object(options, "options")?.options.clone();
            acquire(Side::Read, client, name, options, out)
        })
    }
}

/// One attempt to read for `ttl_ms`: as [`fencelock_rw_read`] with no wait;
/// `NOT_ACQUIRED` when a writer holds the lock or waits for it.
///
/// Blocks for one attempt (at most about the per-node timeout). Thread-safe.
///
/// # Safety
/// As [`fencelock_rw_read`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_rw_try_read(
    client: *const fencelock_client,
    name: *const c_char,
    ttl_ms: u64,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { fencelock_rw_read(client, name, ttl_ms, 0, out, error) }
}

/// Takes the read-write lock `name` for writing, alone, waiting (woken when
/// the last reader or the writer releases) for up to `wait_ms` while readers
/// or another writer hold it. A waiting writer waits only for the readers
/// already holding when it queued: readers that ask after it queue behind
/// it. The grant lives `ttl_ms` on Redis and is renewed automatically until
/// released (unless auto-renew is off).
///
/// * `name`, `ttl_ms`, `wait_ms`, `error`: as [`fencelock_rw_read`].
/// * `out`: receives the write grant on success only: a `fencelock_lock`
///   whose resource is `name` and whose fencing token is larger than that of
///   every read and write grant of this lock before it (so a store that
///   keeps the largest token it has seen refuses a stale writer). Extend,
///   release (which lets the next waiters in), lost callback and events work
///   as for any lock. Free it with `fencelock_lock_free`.
///
/// Statuses as [`crate::fencelock_acquire`]: `TIMEOUT` (readers or a writer
/// held it for all of `wait_ms`), `NOT_ACQUIRED` (the same with `wait_ms`
/// 0), `UNAVAILABLE`, `INVALID_ARGUMENT` (bad name, ttl or wait),
/// `INVALID_UTF8`, `NULL_ARGUMENT`, `CLOSED`, `WOULD_BLOCK`.
///
/// Blocks up to about `wait_ms` plus one attempt (bounded by the per-node
/// timeout); use [`fencelock_rw_write_async`] not to block. Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `name` is NULL or NUL-terminated; `out` and
/// `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_rw_write(
    client: *const fencelock_client,
    name: *const c_char,
    ttl_ms: u64,
    wait_ms: u64,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            acquire(Side::Write, client, name, lock_options(ttl_ms, wait_ms), out)
        })
    }
}

/// Takes the lock for writing as [`fencelock_rw_write`] does, with the ttl,
/// wait, auto-renew, renewal caps and fair waiting of `options` (which the
/// call copies: free or reuse them right after). Fair: the writer never
/// goes ahead of an earlier waiter of the lock, reader or writer.
///
/// Statuses, blocking and threading as [`fencelock_rw_write`];
/// `INVALID_ARGUMENT` also for an option out of range.
///
/// # Safety
/// As [`fencelock_rw_write`]; `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_rw_write_with(
    client: *const fencelock_client,
    name: *const c_char,
    options: *const fencelock_lock_options,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let options = args::object(options, "options")?.options.clone();
            acquire(Side::Write, client, name, options, out)
        })
    }
}

/// One attempt to write for `ttl_ms`: as [`fencelock_rw_write`] with no
/// wait; `NOT_ACQUIRED` when a reader or another writer holds the lock.
///
/// Blocks for one attempt (at most about the per-node timeout). Thread-safe.
///
/// # Safety
/// As [`fencelock_rw_write`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_rw_try_write(
    client: *const fencelock_client,
    name: *const c_char,
    ttl_ms: u64,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { fencelock_rw_write(client, name, ttl_ms, 0, out, error) }
}

/// The blocking acquire behind [`fencelock_rw_read`], [`fencelock_rw_write`]
/// and their `_with` forms.
///
/// # Safety
/// As [`fencelock_rw_read`].
unsafe fn acquire(
    side: Side,
    client: *const fencelock_client,
    name: *const c_char,
    options: LockOptions,
    out: *mut *mut fencelock_lock,
) -> FfiResult {
    // SAFETY: per the contract.
    unsafe {
        let client = args::object(client, "client")?;
        let rw = rw_lock(client, name)?;
        let out = args::out(out, "out")?;
        let grant = fencelock::block_on(side.take(rw, options))??;
        args::give(out, fencelock_lock::new(grant, &client.events)?);
    }
    Ok(())
}

/// Starts taking the read-write lock `name` for reading (as
/// [`fencelock_rw_read`], `wait_ms` 0 for one attempt) and returns at once;
/// `callback` gets the read grant (a `fencelock_lock`, the callback's to
/// free) or the failure exactly once, on fencelock's callback thread,
/// possibly before this function returns.
///
/// `operation_out`, `user_data` and the returned status as
/// [`crate::fencelock_acquire_async`]: a bad name, ttl or wait fails this
/// call (`INVALID_ARGUMENT`…) and the callback is never called. Cancelling
/// the operation stops the wait (the reader leaves the queue) and undoes any
/// partial grant. Never blocks. Thread-safe.
///
/// # Safety
/// As [`fencelock_rw_read`]; `callback` is NULL or a function of that type;
/// `operation_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_rw_read_async(
    client: *const fencelock_client,
    name: *const c_char,
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
            start_acquire(
                Side::Read,
                client,
                name,
                options,
                callback,
                user_data,
                operation_out,
            )
        })
    }
}

/// Starts taking the lock for reading as [`fencelock_rw_read_async`] does,
/// with the options of `options` (copied: free or reuse them right after).
/// Statuses, callback and threading as [`fencelock_rw_read_async`]. Never
/// blocks.
///
/// # Safety
/// As [`fencelock_rw_read_async`]; `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_rw_read_with_async(
    client: *const fencelock_client,
    name: *const c_char,
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
            start_acquire(
                Side::Read,
                client,
                name,
                options,
                callback,
                user_data,
                operation_out,
            )
        })
    }
}

/// Starts taking the read-write lock `name` for writing (as
/// [`fencelock_rw_write`], `wait_ms` 0 for one attempt) and returns at once;
/// `callback` gets the write grant (a `fencelock_lock`, the callback's to
/// free) or the failure exactly once, on fencelock's callback thread,
/// possibly before this function returns.
///
/// `operation_out`, `user_data` and the returned status as
/// [`crate::fencelock_acquire_async`]: a bad name, ttl or wait fails this
/// call (`INVALID_ARGUMENT`…) and the callback is never called. Cancelling
/// the operation stops the wait (the writer leaves the queue, so the readers
/// behind it may go in) and undoes any partial grant. Never blocks.
/// Thread-safe.
///
/// # Safety
/// As [`fencelock_rw_write`]; `callback` is NULL or a function of that type;
/// `operation_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_rw_write_async(
    client: *const fencelock_client,
    name: *const c_char,
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
            start_acquire(
                Side::Write,
                client,
                name,
                options,
                callback,
                user_data,
                operation_out,
            )
        })
    }
}

/// Starts taking the lock for writing as [`fencelock_rw_write_async`] does,
/// with the options of `options` (copied: free or reuse them right after).
/// Statuses, callback and threading as [`fencelock_rw_write_async`]. Never
/// blocks.
///
/// # Safety
/// As [`fencelock_rw_write_async`]; `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_rw_write_with_async(
    client: *const fencelock_client,
    name: *const c_char,
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
            start_acquire(
                Side::Write,
                client,
                name,
                options,
                callback,
                user_data,
                operation_out,
            )
        })
    }
}

/// The start of the `_async` reads and writes.
///
/// # Safety
/// As [`fencelock_rw_read_async`].
unsafe fn start_acquire(
    side: Side,
    client: *const fencelock_client,
    name: *const c_char,
    options: LockOptions,
    callback: fencelock_acquire_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
) -> FfiResult {
    // SAFETY: per the contract.
    unsafe {
        let client = args::object(client, "client")?;
        let rw = rw_lock(client, name)?;
        let callback = callback.ok_or_else(|| Failure::null("callback"))?;
        // Bad arguments fail the call itself, as in the blocking variant.
        check_options(&client.inner, &rw, &options)?;
        start_acquire_work(
            side.take(rw, options),
            &client.events,
            callback,
            user_data,
            operation_out,
        )
    }
}

/// Checks a read or write request's ttl and wait without any I/O.
fn check_options(client: &Client, rw: &RwLock, options: &LockOptions) -> FfiResult {
    // The name was checked by `Client::rw_lock`, by the rule of a resource.
    Ok(client.check_request(rw.name(), options)?)
}

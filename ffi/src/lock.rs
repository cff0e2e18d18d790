//! `fencelock_lock`: a held lock, and the blocking calls that take and end it.

use std::ffi::{CString, c_char, c_void};
use std::sync::Arc;

use fencelock::{Lock, LockOptions};
use tokio::task::AbortHandle;

use crate::args;
use crate::boundary::{FfiResult, boundary, boundary_status};
use crate::client::fencelock_client;
use crate::error::{c_string, fencelock_error};
use crate::events::EventHub;
use crate::fence::fencelock_fence;
use crate::lock_options::fencelock_lock_options;
use crate::lost::{LostCallback, fencelock_lost_callback, watch};
use crate::status::fencelock_status;

/// A lock taken by `fencelock_acquire`, `fencelock_acquire_with`,
/// `fencelock_try_acquire` or their `_async` variants; also a leadership
/// (`fencelock_campaign`), a semaphore's permit
/// (`fencelock_semaphore_acquire`, see `fencelock_lock_permit`) and a
/// read-write lock's read or write grant (`fencelock_rw_read`,
/// `fencelock_rw_write`).
///
/// Release it with [`fencelock_lock_release`] (network), then free it with
/// [`fencelock_lock_free`] (memory). Freeing a lock that is still held stops
/// its renewal without blocking; the key then expires at its ttl.
///
/// Thread-safe for every function except `fencelock_lock_free`, which must
/// not run while another thread uses the same lock.
pub struct fencelock_lock {
    pub(crate) inner: Lock,
    resource: CString,
    watcher: AbortHandle,
    pub(crate) on_lost: Arc<LostCallback>,
}

impl fencelock_lock {
    /// Wraps a core lock and starts reporting its loss: to its own callback
    /// once one is set, to the client's `events` otherwise.
    pub(crate) fn new(inner: Lock, events: &Arc<EventHub>) -> FfiResult<Self> {
        let on_lost = Arc::<LostCallback>::default();
        Ok(fencelock_lock {
            watcher: watch(&inner, events.clone(), on_lost.clone())?,
            resource: c_string(inner.resource().to_owned()),
            on_lost,
            inner,
        })
    }
}

impl Drop for fencelock_lock {
    fn drop(&mut self) {
        // Dropping `inner` stops renewal; the watcher would otherwise wait forever.
        self.watcher.abort();
        self.on_lost.clear();
    }
}

/// The options of a C acquire: ttl and wait in milliseconds, the rest from the client.
pub(crate) fn lock_options(ttl_ms: u64, wait_ms: u64) -> LockOptions {
    LockOptions::new(args::millis(ttl_ms)).wait(args::millis(wait_ms))
}

/// Takes the lock on `resource`, retrying with backoff for up to `wait_ms`
/// while another owner holds it. The lock lives `ttl_ms` on Redis and is
/// renewed automatically until released (unless auto-renew is off).
///
/// * `resource`: NUL-terminated UTF-8, 1 to 1024 bytes, borrowed for the call.
/// * `out`: receives the lock on success only.
/// * `error`: NULL, or receives detail on failure (node by node).
///
/// Statuses: `OK`; `TIMEOUT` (held elsewhere for all of `wait_ms`);
/// `NOT_ACQUIRED` (held elsewhere and `wait_ms` is 0); `UNAVAILABLE` (no
/// majority of nodes answered); `INVALID_ARGUMENT` (empty or oversized
/// resource, `ttl_ms` 0 or above `INT32_MAX`); `INVALID_UTF8`; `NULL_ARGUMENT`;
/// `CLOSED` (client freed or used after `fork()`); `WOULD_BLOCK` (called on a
/// thread of an async runtime: use `fencelock_acquire_async` there).
///
/// Blocks up to about `wait_ms` plus one attempt (bounded by the per-node
/// timeout). From a fencelock callback it works, and holds up the callbacks
/// after it for that long: prefer `fencelock_acquire_async` there. Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `resource` is NULL or NUL-terminated; `out` and
/// `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_acquire(
    client: *const fencelock_client,
    resource: *const c_char,
    ttl_ms: u64,
    wait_ms: u64,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            acquire(client, resource, lock_options(ttl_ms, wait_ms), out)
        })
    }
}

/// Takes the lock on `resource` as [`fencelock_acquire`] does, with the ttl,
/// wait, auto-renew and renewal caps of `options` (which the call copies:
/// free or reuse them right after).
///
/// Statuses and blocking as [`fencelock_acquire`]; `INVALID_ARGUMENT` also
/// for an option out of range (a ttl or wait too large…). Thread-safe.
///
/// # Safety
/// As [`fencelock_acquire`]; `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_acquire_with(
    client: *const fencelock_client,
    resource: *const c_char,
    options: *const fencelock_lock_options,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let options = args::object(options, "options")?.options.clone();
            acquire(client, resource, options, out)
        })
    }
}

/// The blocking acquire behind [`fencelock_acquire`] and [`fencelock_acquire_with`].
///
/// # Safety
/// As [`fencelock_acquire`].
unsafe fn acquire(
    client: *const fencelock_client,
    resource: *const c_char,
    options: LockOptions,
    out: *mut *mut fencelock_lock,
) -> FfiResult {
    // SAFETY: per the contract.
    unsafe {
        let client = args::object(client, "client")?;
        let resource = args::text(resource, "resource")?.to_owned();
        let out = args::out(out, "out")?;
        let core = client.inner.clone();
        let lock = fencelock::block_on(async move { core.acquire(&resource, options).await })??;
        args::give(out, fencelock_lock::new(lock, &client.events)?);
    }
    Ok(())
}

/// One attempt to take the lock on `resource` for `ttl_ms`: as
/// [`fencelock_acquire`] with no wait, except that a lock held elsewhere is
/// `FENCELOCK_STATUS_NOT_ACQUIRED`.
///
/// Blocks for one attempt (at most about the per-node timeout). Thread-safe.
///
/// # Safety
/// As [`fencelock_acquire`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_try_acquire(
    client: *const fencelock_client,
    resource: *const c_char,
    ttl_ms: u64,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // One attempt is an acquire without a wait: its NOT_ACQUIRED carries
    // what each node answered.
    // SAFETY: per the contract.
    unsafe { fencelock_acquire(client, resource, ttl_ms, 0, out, error) }
}

/// Runs `read` on a lock and writes its result to `out`.
///
/// # Safety
/// `lock` is NULL or live; `out` is NULL or writable.
unsafe fn read_lock<T>(
    lock: *const fencelock_lock,
    out: *mut T,
    read: impl FnOnce(&Lock) -> T,
) -> fencelock_status {
    boundary_status(|| {
        // SAFETY: per the contract.
        let lock = unsafe { args::object(lock, "lock") }?;
        let out = args::out(out, "out")?;
        let value = read(&lock.inner);
        // SAFETY: checked non-NULL; writable per the contract.
        unsafe { out.write(value) };
        Ok(())
    })
}

/// The lock's resource, NUL-terminated UTF-8.
///
/// Ownership: the string belongs to `lock` and lives until
/// `fencelock_lock_free`; do not free it. NULL when `lock` is NULL.
/// Never blocks; thread-safe.
///
/// # Safety
/// `lock` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_resource(lock: *const fencelock_lock) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { lock.as_ref() }.map_or(std::ptr::null(), |lock| lock.resource.as_ptr())
}

/// Writes the lock's fencing token: strictly greater than every earlier
/// holder's token for this resource. Send it with every write to the storage
/// the lock protects, and have the storage refuse older tokens.
///
/// Never blocks; thread-safe.
///
/// # Safety
/// `lock` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_fencing_token(
    lock: *const fencelock_lock,
    out: *mut u64,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { read_lock(lock, out, Lock::fencing_token) }
}

/// Writes what a fenced write of this holder carries: the fencing token and
/// this grant's holder id (see [`crate::fencelock_fenced_set_fence`]).
///
/// Never blocks; thread-safe.
///
/// # Safety
/// `lock` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_fence(
    lock: *const fencelock_lock,
    out: *mut fencelock_fence,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { read_lock(lock, out, |lock| lock.fence().into()) }
}

/// Writes whether the lock is held: not released, not lost, and its
/// validity (on the local monotonic clock) not run out.
///
/// Never blocks; thread-safe.
///
/// # Safety
/// `lock` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_is_held(
    lock: *const fencelock_lock,
    out: *mut bool,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { read_lock(lock, out, Lock::is_held) }
}

/// Writes how many milliseconds the lock stays valid without another
/// renewal (0 when not held). Never blocks; thread-safe.
///
/// # Safety
/// `lock` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_remaining_ms(
    lock: *const fencelock_lock,
    out: *mut u64,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { read_lock(lock, out, |lock| lock.remaining().as_millis() as u64) }
}

/// Sets the lock's ttl to `ttl_ms` from now on a majority of nodes (it never
/// re-creates a missing key); later renewals use the new ttl.
///
/// Statuses: `OK`; `LOST` (the key is gone or owned by another: stop);
/// `NOT_HELD` (released before); `UNAVAILABLE`; `INVALID_ARGUMENT` (ttl);
/// `WOULD_BLOCK` (on a thread of an async runtime).
///
/// Blocks for one round trip to the nodes (bounded by the per-node timeout).
/// Thread-safe.
///
/// # Safety
/// `lock` is NULL or live; `error` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_extend(
    lock: *const fencelock_lock,
    ttl_ms: u64,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let lock = args::object(lock, "lock")?;
            Ok(fencelock::block_on(
                lock.inner.extend_task(args::millis(ttl_ms)),
            )??)
        })
    }
}

/// Releases the lock on every node (compare-and-delete) and stops renewal.
/// The lock must still be freed with [`fencelock_lock_free`].
///
/// Statuses: `OK` (it was ours and is deleted); `NOT_HELD` (it had expired,
/// been taken over, been lost, or was released before: calling twice is
/// safe); `UNAVAILABLE` (too few nodes confirmed it; those that failed get
/// it again in the background, and where it never lands the lock expires
/// at its ttl);
/// `WOULD_BLOCK` (on a thread of an async runtime: use
/// `fencelock_lock_release_async`).
/// Works after the client was freed.
///
/// Blocks for one round trip to the nodes (bounded by the per-node timeout).
/// Thread-safe.
///
/// # Safety
/// `lock` is NULL or live; `error` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_release(
    lock: *const fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let lock = args::object(lock, "lock")?;
            Ok(fencelock::block_on(lock.inner.release_task())??)
        })
    }
}

/// Frees a lock. NULL is a no-op. If it is still held, renewal stops and the
/// key expires at its ttl (call [`fencelock_lock_release`] first to free it
/// at once). No network I/O. When it returns, no call of the lock's lost
/// callback ([`crate::fencelock_lock_on_lost`]) runs or can start: it waits
/// while one is in progress, except when called from a fencelock callback.
///
/// # Safety
/// `lock` is NULL or from this library, not freed before, and not in use by
/// another thread during or after this call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_free(lock: *mut fencelock_lock) {
    // SAFETY: per the contract.
    drop(unsafe { args::take(lock) });
}

/// Calls `callback(user_data, reason)` once when `lock` is lost, on
/// fencelock's callback thread; at once (there) if it is lost already. Never
/// called after the lock was released. A second call replaces the callback;
/// NULL clears it. A loss reported here does not also go to the client's
/// event callback or queue (one lost before its callback was set does).
///
/// `user_data` is passed back untouched and must be usable from another
/// thread. When this returns, or when `fencelock_lock_free` returns, no call
/// of the replaced (or freed) callback runs or can start, so its `user_data`
/// may be freed: for that both wait while such a call is in progress (so do
/// not call them holding a lock that callback takes). From inside a fencelock
/// callback they return at once (the only call in progress is the caller's
/// own).
///
/// Errors: `NULL_ARGUMENT` (`lock`); `CLOSED` if the callback thread cannot
/// be started. Never blocks beyond the wait above. Thread-safe.
///
/// # Safety
/// `lock` is NULL or live; `callback` is NULL or a function with this
/// signature; `error` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_on_lost(
    lock: *const fencelock_lock,
    callback: fencelock_lost_callback,
    user_data: *mut c_void,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let lock = args::object(lock, "lock")?;
            lock.on_lost.set_callback(callback, user_data)
        })
    }
}

//! Callback variants: start an operation, get exactly one callback on the
//! callback thread (see `dispatch.rs`), cancel it if it is no longer wanted.

use std::ffi::{c_char, c_void};
use std::future::Future;
use std::panic::AssertUnwindSafe;

use std::sync::Arc;

use fencelock::{Canceller, Lock, LockOptions};
use futures_util::FutureExt;

use crate::args;
use crate::boundary::{Failure, FfiResult, boundary};
use crate::client::fencelock_client;
use crate::dispatch::{Dispatcher, UserData};
use crate::error::fencelock_error;
use crate::events::EventHub;
use crate::lock::{fencelock_lock, lock_options};
use crate::lock_options::fencelock_lock_options;
use crate::status::fencelock_status;

/// Called once when an acquire started by [`fencelock_acquire_async`] ends,
/// on fencelock's callback thread.
///
/// On `FENCELOCK_STATUS_OK`, `lock` is the new lock and `error` is NULL;
/// otherwise `lock` is NULL and `error` holds the detail. Both become the
/// callback's to free (`fencelock_lock_free`, `fencelock_error_free`), now or
/// later from any thread. The lock is held, and renewed, from before the
/// call: a slow callback does not lose it.
///
/// The callback may call any fencelock function, blocking ones included;
/// while it runs, the process's later callbacks wait (never its I/O or
/// renewals), so hand long work to your own thread.
pub type fencelock_acquire_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: fencelock_status,
        lock: *mut fencelock_lock,
        error: *mut fencelock_error,
    ),
>;

/// Called once when an operation without a result (a release, an extend)
/// ends, on fencelock's callback thread. `error` is NULL on success, else the
/// callback's to free. Same rules as [`fencelock_acquire_callback`].
pub type fencelock_done_callback = Option<
    unsafe extern "C" fn(user_data: *mut c_void, status: fencelock_status, error: *mut fencelock_error),
>;

/// A handle on an operation in flight, to cancel it.
///
/// Owned by the caller and freed with [`fencelock_operation_free`], which
/// does not cancel. Freeing it before, during (from the callback itself) or
/// after the callback is fine. Thread-safe.
pub struct fencelock_operation {
    canceller: Canceller,
}

/// Spawns `work` on the runtime and calls `finish` with its result exactly
/// once, on the callback thread: with the result, with `CANCELLED` after a
/// cancel, or with `INTERNAL` if `work` panicked. Writes a cancel handle to
/// `operation_out` when it is not NULL.
///
/// # Safety
/// `operation_out` is NULL or writable.
pub(crate) unsafe fn start<T: Send + 'static>(
    work: impl Future<Output = FfiResult<T>> + Send + 'static,
    finish: impl FnOnce(FfiResult<T>) + Send + 'static,
    operation_out: *mut *mut fencelock_operation,
) -> FfiResult {
    let runtime = fencelock::runtime_handle()?;
    let callbacks = Dispatcher::get()?;
    let canceller = Canceller::new();
    // The handle is written before the work exists: once spawned, the
    // callback may run before `spawn` returns and free the caller's memory
    // that `operation_out` points into.
    if !operation_out.is_null() {
        let operation = fencelock_operation {
            canceller: canceller.clone(),
        };
        // SAFETY: non-NULL and writable per the contract.
        unsafe { args::give(operation_out, operation) };
    }
    runtime.spawn(async move {
        let result = run_cancellable(work, &canceller).await;
        // C code never runs on the runtime thread: see dispatch.rs.
        callbacks.submit(move || finish(result));
    });
    Ok(())
}

/// Runs `work` until it ends or `canceller` is raised (the core's
/// `cancelled`, this ABI's `CANCELLED`); a panic in `work` becomes `INTERNAL`.
async fn run_cancellable<T>(work: impl Future<Output = FfiResult<T>>, canceller: &Canceller) -> FfiResult<T> {
    match canceller.run(AssertUnwindSafe(work).catch_unwind()).await {
        Ok(Ok(result)) => result,
        Ok(Err(_panic)) => Err(Failure::new(
            fencelock_status::FENCELOCK_STATUS_INTERNAL,
            "internal error in fencelock (a bug, please report it)",
        )),
        Err(cancelled) => Err(cancelled.into()),
    }
}

/// Splits a result into the callback's status and error object.
pub(crate) fn into_status(result: FfiResult) -> (fencelock_status, *mut fencelock_error) {
    match result {
        Ok(()) => (fencelock_status::FENCELOCK_STATUS_OK, std::ptr::null_mut()),
        Err(failure) => (
            failure.status,
            Box::into_raw(Box::new(fencelock_error::from(failure))),
        ),
    }
}

/// Starts taking the lock on `resource` (as [`crate::fencelock_acquire`],
/// `wait_ms` 0 for one attempt) and returns at once; `callback` gets the
/// outcome exactly once, on fencelock's callback thread, possibly before this
/// function returns.
///
/// * `operation_out`: NULL, or receives a handle for
///   [`fencelock_operation_cancel`]; free it with `fencelock_operation_free`.
///   It is written before the operation starts, so the callback always finds
///   it there, and may free the memory that holds it.
/// * `user_data`: passed back untouched; must stay valid, and usable from
///   another thread, until the callback ran (cancelling or freeing the
///   operation does not change that).
///
/// Returns `OK` when started; any other status (`INVALID_ARGUMENT` for an
/// empty or oversized resource or a ttl/wait out of range, as
/// `fencelock_acquire`; `CLOSED` if the callback thread cannot be started)
/// means the callback will never be called (and `error`, if not NULL, says
/// why). Never blocks.
/// Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `resource` is NULL or NUL-terminated;
/// `callback` is NULL or a function of that type; the out-pointers are NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_acquire_async(
    client: *const fencelock_client,
    resource: *const c_char,
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
            start_acquire(client, resource, options, callback, user_data, operation_out)
        })
    }
}

/// Starts taking the lock on `resource` as [`fencelock_acquire_async`] does,
/// with the options of `options` (copied: free or reuse them right after).
/// Statuses, callback and threading as [`fencelock_acquire_async`]. Never blocks.
///
/// # Safety
/// As [`fencelock_acquire_async`]; `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_acquire_with_async(
    client: *const fencelock_client,
    resource: *const c_char,
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
            start_acquire(client, resource, options, callback, user_data, operation_out)
        })
    }
}

/// The start of [`fencelock_acquire_async`] and [`fencelock_acquire_with_async`].
///
/// # Safety
/// As [`fencelock_acquire_async`].
unsafe fn start_acquire(
    client: *const fencelock_client,
    resource: *const c_char,
    options: LockOptions,
    callback: fencelock_acquire_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
) -> FfiResult {
    // SAFETY: per the contract.
    unsafe {
        let client = args::object(client, "client")?;
        let resource = args::text(resource, "resource")?.to_owned();
        let callback = callback.ok_or_else(|| Failure::null("callback"))?;
        let core = client.inner.clone();
        // Bad arguments fail the call itself, as in the blocking variant.
        core.check_request(&resource, &options)?;
        let work = async move { core.acquire(&resource, options).await };
        start_acquire_work(work, &client.events, callback, user_data, operation_out)
    }
}

/// Starts `work`, which takes a lock (an acquire, a campaign), and hands the
/// lock or the failure to `callback` as [`fencelock_acquire_callback`] says.
///
/// # Safety
/// `callback` is a function of that type; `operation_out` is NULL or writable.
pub(crate) unsafe fn start_acquire_work(
    work: impl Future<Output = fencelock::Result<Lock>> + Send + 'static,
    events: &Arc<EventHub>,
    callback: unsafe extern "C" fn(*mut c_void, fencelock_status, *mut fencelock_lock, *mut fencelock_error),
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
) -> FfiResult {
    let user_data = UserData(user_data);
    let events = events.clone();
    let work = async move { fencelock_lock::new(work.await?, &events) };
    let finish = move |result: FfiResult<fencelock_lock>| {
        let (lock, result) = match result {
            Ok(lock) => (Box::into_raw(Box::new(lock)), Ok(())),
            Err(failure) => (std::ptr::null_mut(), Err(failure)),
        };
        let (status, error) = into_status(result);
        // SAFETY: the caller's callback, called once with what it documents.
        unsafe { callback(user_data.get(), status, lock, error) };
    };
    // SAFETY: per the contract.
    unsafe { start(work, finish, operation_out) }
}

/// Starts releasing `lock` (as [`crate::fencelock_lock_release`]) and returns
/// at once; `callback` gets the outcome exactly once on fencelock's callback
/// thread. The lock may be freed right after this call returns: the
/// operation keeps what it needs. Cancelling the operation stops the wait,
/// not the release: the callback gets `CANCELLED` at once and the release
/// goes on in the background ([`crate::fencelock_settle`] waits for it).
/// Other arguments as [`fencelock_acquire_async`]. Never blocks. Thread-safe.
///
/// # Safety
/// `lock` is NULL or live; `callback` is NULL or a function of that type;
/// the out-pointers are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_release_async(
    lock: *const fencelock_lock,
    callback: fencelock_done_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let lock = args::object(lock, "lock")?;
            start_done(lock.inner.release_task(), callback, user_data, operation_out)
        })
    }
}

/// Starts extending `lock` to `ttl_ms` from now (as
/// [`crate::fencelock_lock_extend`]) and returns at once; `callback` gets the
/// outcome exactly once on fencelock's callback thread. The lock may be freed
/// while the extension is in flight. Cancelling the operation stops the
/// wait, not the extension, as for [`fencelock_lock_release_async`]. Other
/// arguments as [`fencelock_acquire_async`]. Never blocks. Thread-safe.
///
/// # Safety
/// As [`fencelock_lock_release_async`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_extend_async(
    lock: *const fencelock_lock,
    ttl_ms: u64,
    callback: fencelock_done_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let lock = args::object(lock, "lock")?;
            lock.inner.check_extend(args::millis(ttl_ms))?;
            let extend = lock.inner.extend_task(args::millis(ttl_ms));
            start_done(extend, callback, user_data, operation_out)
        })
    }
}

/// [`start`] for operations that report only a status: `callback` (NULL is
/// refused) gets the outcome of `work`.
///
/// # Safety
/// `callback` is NULL or a function of that type; `operation_out` is NULL or writable.
pub(crate) unsafe fn start_done(
    work: impl Future<Output = fencelock::Result<()>> + Send + 'static,
    callback: fencelock_done_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
) -> FfiResult {
    let callback = callback.ok_or_else(|| Failure::null("callback"))?;
    let user_data = UserData(user_data);
    let work = async move { Ok(work.await?) };
    let finish = move |result: FfiResult| {
        let (status, error) = into_status(result);
        // SAFETY: the caller's callback, called once with what it documents.
        unsafe { callback(user_data.get(), status, error) };
    };
    // SAFETY: per the contract.
    unsafe { start(work, finish, operation_out) }
}

/// Asks the operation to stop. If it has not finished, it stops and its
/// callback is called with `FENCELOCK_STATUS_CANCELLED` (an acquire
/// cancelled this way undoes any partial grant); if it has finished, its
/// callback gets the outcome (maybe still queued behind other callbacks) and
/// this does nothing. Never blocks; thread-safe; calling twice is harmless.
///
/// It does not wait for the callback, which may still be queued or running
/// when this returns: the callback tells you the operation is over, so free
/// `user_data` there. (Waiting here could deadlock a caller that holds a
/// lock the callback takes, and the callback may cancel its own operation.)
///
/// # Safety
/// `operation` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_operation_cancel(
    operation: *const fencelock_operation,
) -> fencelock_status {
    crate::boundary::boundary_status(|| {
        // SAFETY: per the contract.
        let operation = unsafe { args::object(operation, "operation") }?;
        operation.canceller.cancel();
        Ok(())
    })
}

/// Frees an operation handle without cancelling the operation. NULL is a
/// no-op. Never blocks, and does not wait for the callback: the operation
/// still calls it exactly once, so its `user_data` must stay valid until then.
///
/// # Safety
/// `operation` is NULL or from this library, not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_operation_free(operation: *mut fencelock_operation) {
    // SAFETY: per the contract.
    drop(unsafe { args::take(operation) });
}

//! `fencelock_lock_options`: what one acquire asks for beyond ttl and wait
//! (auto-renew, a cap on the total hold, a cap on renewals, fair waiting).

use fencelock::LockOptions;

use crate::args;
use crate::boundary::{Failure, boundary_status};
use crate::status::fencelock_status;

/// The options of one acquire, for [`crate::fencelock_acquire_with`] and
/// [`crate::fencelock_acquire_with_async`]: a ttl, and optionally a wait,
/// auto-renew on or off, a cap on the total hold and a cap on the number of
/// renewals. Unset fields take the client's defaults. Values are checked by
/// the acquire that uses them (`INVALID_ARGUMENT`, with a message), never by
/// the setters.
///
/// Owned by the caller; freed with [`fencelock_lock_options_free`]. An
/// acquire copies what it needs, so the options may be freed or reused
/// right after the call returns. Not thread-safe: do not set from two
/// threads at once; reading them from several acquires at once is fine.
pub struct fencelock_lock_options {
    pub(crate) options: LockOptions,
}

/// Creates lock options with a ttl of `ttl_ms` and every other field unset.
///
/// `out` receives the new object (NULL → `FENCELOCK_STATUS_NULL_ARGUMENT`).
/// Never blocks.
///
/// # Safety
/// `out` is NULL or valid for one pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_options_new(
    ttl_ms: u64,
    out: *mut *mut fencelock_lock_options,
) -> fencelock_status {
    boundary_status(|| {
        let out = args::out(out, "out")?;
        let options = fencelock_lock_options {
            options: LockOptions::new(args::millis(ttl_ms)),
        };
        // SAFETY: checked above.
        unsafe { args::give(out, options) };
        Ok(())
    })
}

/// Frees lock options. NULL is a no-op. Never blocks.
///
/// # Safety
/// `options` is NULL or from [`fencelock_lock_options_new`], not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_options_free(options: *mut fencelock_lock_options) {
    // SAFETY: per the contract.
    drop(unsafe { args::take(options) });
}

/// Applies `set` to the options behind `options`.
///
/// # Safety
/// `options` is NULL or a live, exclusively used `fencelock_lock_options`.
unsafe fn update(
    options: *mut fencelock_lock_options,
    set: impl FnOnce(LockOptions) -> LockOptions,
) -> fencelock_status {
    boundary_status(|| {
        // SAFETY: per the contract.
        let options = unsafe { options.as_mut() }.ok_or_else(|| Failure::null("options"))?;
        options.options = set(std::mem::take(&mut options.options));
        Ok(())
    })
}

/// Sets how long the acquire retries while another owner holds the lock
/// (0: one attempt; default: the client's, 10 s).
///
/// # Safety
/// `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_options_set_wait_ms(
    options: *mut fencelock_lock_options,
    wait_ms: u64,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { update(options, |o| o.wait(args::millis(wait_ms))) }
}

/// Turns auto-renewal on or off for this lock (default: the client's,
/// `fencelock_options_set_auto_renew`). Off gives a fixed lease that ends at
/// its ttl unless extended.
///
/// # Safety
/// `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_options_set_auto_renew(
    options: *mut fencelock_lock_options,
    auto_renew: bool,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { update(options, |o| o.auto_renew(auto_renew)) }
}

/// Stops auto-renewal so the lock is not held longer than `max_hold_ms` in
/// total (default: no cap). The lock then expires at its ttl and is reported
/// lost with reason `EXPIRED`.
///
/// # Safety
/// `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_options_set_max_hold_ms(
    options: *mut fencelock_lock_options,
    max_hold_ms: u64,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { update(options, |o| o.max_hold(args::millis(max_hold_ms))) }
}

/// Stops auto-renewal after `max_renewals` renewals (default: no cap).
///
/// # Safety
/// `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_options_set_max_renewals(
    options: *mut fencelock_lock_options,
    max_renewals: u32,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { update(options, |o| o.max_renewals(max_renewals)) }
}

/// Turns fair (FIFO) waiting on or off (default off). Fair: the acquire
/// never takes the lock ahead of an earlier waiter, even when the lock is
/// free at the moment it asks. Off: waiters are still woken in arrival
/// order, but a newcomer may take a lock that is free (docs/protocol.md §4.9).
///
/// # Safety
/// `options` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_lock_options_set_fair(
    options: *mut fencelock_lock_options,
    fair: bool,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { update(options, |o| o.fair(fair)) }
}

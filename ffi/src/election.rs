//! Leader election for C: a campaign is an acquire that announces its
//! winner, so a leadership is handed out as a `fencelock_lock` on the
//! election's name (its fencing token is the epoch; releasing it resigns;
//! its lost callback and events say leadership was lost).

use std::ffi::{c_char, c_void};

use fencelock::{CampaignOptions, Client};

use crate::args;
use crate::boundary::{Failure, FfiResult, boundary};
use crate::client::fencelock_client;
use crate::error::fencelock_error;
use crate::lock::fencelock_lock;
use crate::operation::{fencelock_acquire_callback, fencelock_operation, start_acquire_work};
use crate::status::fencelock_status;

/// Reads a campaign's arguments: the lease, the wait and the announced value.
///
/// # Safety
/// `value` is NULL or valid for `value_len` bytes.
unsafe fn campaign_options(
    ttl_ms: u64,
    wait_ms: u64,
    value: *const u8,
    value_len: usize,
) -> FfiResult<CampaignOptions> {
    let value: &[u8] = if value_len == 0 {
        &[]
    } else {
        // SAFETY: per the contract.
        unsafe { args::bytes(value, value_len, "value") }?
    };
    Ok(CampaignOptions::new(args::millis(ttl_ms))
        .wait(args::millis(wait_ms))
        .value(value))
}

/// Campaigns to lead the election `name`: waits in line (woken by push, as
/// any waiter) for up to `wait_ms` until it wins, then announces itself to
/// observers ([`crate::fencelock_observe`]) with `value`, and writes its
/// leadership to `out` as a lock on `name`.
///
/// * `name`: NUL-terminated UTF-8, as a resource. Do not also lock `name`
///   for anything else: an election is a lock on its name.
/// * `ttl_ms`: the leader's lease, renewed while it leads: a leader that
///   dies is replaced about `ttl_ms` later.
/// * `wait_ms`: how long to wait to win; `FENCELOCK_MAX_WAIT_MS` for "until
///   elected", 0 for one attempt.
/// * `value`, `value_len`: what observers learn of this leader (an address,
///   an id), borrowed for the call; at most `FENCELOCK_MAX_LEADER_VALUE_BYTES`.
///   `value` may be NULL when `value_len` is 0.
/// * `out`: receives the leadership on success: a `fencelock_lock` whose
///   fencing token (`fencelock_lock_fencing_token`) is this leader's epoch,
///   greater than every earlier leader's; `fencelock_lock_is_held` says
///   whether it still leads, its lost callback or the client's events say
///   when it stopped, and `fencelock_lock_release` resigns (the next
///   candidate wins at once). Free it with `fencelock_lock_free`.
///
/// Statuses as [`crate::fencelock_acquire`] (`TIMEOUT` once `wait_ms`
/// passed, `NOT_ACQUIRED` when `wait_ms` is 0 and another leads), and
/// `INVALID_ARGUMENT` for a value that is too long.
///
/// Blocks until elected or `wait_ms` passed, plus one round trip to
/// announce. Returns `WOULD_BLOCK` on a thread of an async runtime (use
/// [`fencelock_campaign_async`]). Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `name` is NULL or NUL-terminated; `value` is
/// NULL or valid for `value_len` bytes; `out` and `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_campaign(
    client: *const fencelock_client,
    name: *const c_char,
    ttl_ms: u64,
    wait_ms: u64,
    value: *const u8,
    value_len: usize,
    out: *mut *mut fencelock_lock,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let client = args::object(client, "client")?;
            let name = args::text(name, "name")?.to_owned();
            let options = campaign_options(ttl_ms, wait_ms, value, value_len)?;
            let out = args::out(out, "out")?;
            let core = client.inner.clone();
            let leadership = fencelock::block_on(campaign(core, name, options))??;
            args::give(out, fencelock_lock::new(leadership, &client.events)?);
            Ok(())
        })
    }
}

/// Starts a campaign as [`fencelock_campaign`] does and returns at once;
/// `callback` gets the leadership (a lock, as there) or the failure exactly
/// once, on fencelock's callback thread, possibly before this returns.
/// `operation_out`, `user_data` and the returned status as
/// [`crate::fencelock_acquire_async`]: a bad name, ttl, wait or value fails
/// this call and the callback is never called. Cancelling the operation
/// withdraws the candidate (and resigns if it had just won). Never blocks.
/// Thread-safe.
///
/// # Safety
/// As [`fencelock_campaign`]; `callback` is NULL or a function of that type;
/// `operation_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_campaign_async(
    client: *const fencelock_client,
    name: *const c_char,
    ttl_ms: u64,
    wait_ms: u64,
    value: *const u8,
    value_len: usize,
    callback: fencelock_acquire_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let client = args::object(client, "client")?;
            let name = args::text(name, "name")?.to_owned();
            let options = campaign_options(ttl_ms, wait_ms, value, value_len)?;
            let callback = callback.ok_or_else(|| Failure::null("callback"))?;
            let core = client.inner.clone();
            // Bad arguments fail the call itself, as in the blocking variant.
            core.check_campaign(&name, &options)?;
            let work = campaign(core, name, options);
            start_acquire_work(work, &client.events, callback, user_data, operation_out)
        })
    }
}

/// The campaign behind both variants, as the lock C hands out.
async fn campaign(
    core: Client,
    name: String,
    options: CampaignOptions,
) -> fencelock::Result<fencelock::Lock> {
    Ok(core.campaign(&name, options).await?.into_lock())
}

//! `fencelock_observation`: following an election's leaders from C, by
//! blocking calls or by callback.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use fencelock::{Leader, Observation};

use crate::args;
use crate::boundary::{Failure, FfiResult, boundary};
use crate::client::fencelock_client;
use crate::dispatch::UserData;
use crate::error::fencelock_error;
use crate::operation::{fencelock_operation, into_status, start};
use crate::status::fencelock_status;

/// The leaders of one election, as [`fencelock_observe`] follows them.
///
/// Freed with [`fencelock_observation_free`], which ends its subscriptions.
/// Thread-safe for every function except `fencelock_observation_free`,
/// which must not run while another thread is blocked in
/// [`fencelock_observation_next`] on it. Calls of `fencelock_observation_next`
/// (and `_async`) from several threads take turns: each leader goes to one.
pub struct fencelock_observation {
    /// Shared with the `_next_async` calls in flight; closed by
    /// `fencelock_observation_free`, which ends them.
    leaders: Arc<Observation>,
}

/// A leader of an election: its epoch (its fencing token, greater than every
/// earlier leader's) and the value it announced.
///
/// From [`fencelock_observation_next`] the leader owns `value`: call
/// [`fencelock_leader_clear`] when done. Passed to a
/// [`fencelock_leader_callback`], it is borrowed for the call only.
#[repr(C)]
#[derive(Debug)]
pub struct fencelock_leader {
    /// The leader's epoch.
    pub epoch: u64,
    /// The value it announced: `value_len` bytes, followed by a NUL byte
    /// that `value_len` does not count (so a text value prints as a C
    /// string). Never NULL in a leader this library wrote.
    pub value: *mut u8,
    /// The value's length in bytes (0 for an empty value).
    pub value_len: usize,
}

impl fencelock_leader {
    /// The leader as C sees it, owning a NUL-terminated copy of its value.
    fn owned(leader: Leader) -> Self {
        let value_len = leader.value.len();
        let mut value = leader.value;
        value.push(0);
        fencelock_leader {
            epoch: leader.epoch,
            value: Box::into_raw(value.into_boxed_slice()).cast(),
            value_len,
        }
    }
}

/// Called once when a [`fencelock_observation_next_async`] ends, on
/// fencelock's callback thread. On `FENCELOCK_STATUS_OK`, `leader` is the
/// next leader, valid for the call only (copy what you keep), and `error` is
/// NULL; otherwise `leader` is NULL and `error` (the callback's to free)
/// says why: `CANCELLED` after `fencelock_operation_cancel` or
/// `fencelock_observation_free`, `CLOSED` once the observation cannot go on.
/// Same rules as [`crate::fencelock_acquire_callback`].
pub type fencelock_leader_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: fencelock_status,
        leader: *const fencelock_leader,
        error: *mut fencelock_error,
    ),
>;

/// Follows the election `name`: the current leader, then each new one as it
/// announces itself (learned by push, with a read every 2 s as a safety
/// net). A reader slower than the elections skips to the latest leader.
/// There is no "no leader" item: a leader that resigned or died is followed
/// by the next one to win.
///
/// * `out`: receives the observation; read it with
///   [`fencelock_observation_next`] or `_next_async`, free it with
///   [`fencelock_observation_free`]. It holds one subscriber connection per
///   node while it runs. Freeing the client ends it (its subscriptions
///   close and `_next` returns `CLOSED`); it must still be freed.
///
/// Statuses: `OK`; `INVALID_ARGUMENT` (bad name); `INVALID_UTF8`;
/// `NULL_ARGUMENT`; `CLOSED` (client freed, or used after `fork()`).
/// Never blocks: it subscribes in the background. Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `name` is NULL or NUL-terminated; `out` and
/// `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_observe(
    client: *const fencelock_client,
    name: *const c_char,
    out: *mut *mut fencelock_observation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let client = args::object(client, "client")?;
            let name = args::text(name, "name")?;
            let out = args::out(out, "out")?;
            let observation = fencelock_observation {
                leaders: Arc::new(client.inner.observe(name)?),
            };
            args::give(out, observation);
            Ok(())
        })
    }
}

impl fencelock_observation {
    /// The next leader: within `limit` when one is given (which needs a
    /// runtime's timer), as long as it takes otherwise.
    fn next(&self, limit: Option<Duration>) -> impl Future<Output = FfiResult<Leader>> + Send + 'static {
        let leaders = self.leaders.clone();
        async move {
            let leader = match limit {
                None => leaders.next().await,
                Some(limit) => tokio::time::timeout(limit, leaders.next())
                    .await
                    .map_err(|_| no_leader_within(limit))?,
            };
            leader.ok_or_else(|| ended(&leaders))
        }
    }
}

/// Why an observation yields no more leaders: freed (by
/// `fencelock_observation_free`, while a `_next_async` waited), or ended.
fn ended(leaders: &Observation) -> Failure {
    if leaders.is_closed() {
        return Failure::new(
            fencelock_status::FENCELOCK_STATUS_CANCELLED,
            "the observation was freed while this call waited",
        );
    }
    Failure::new(
        fencelock_status::FENCELOCK_STATUS_CLOSED,
        "the observation ended: its client was freed (or fencelock's runtime is gone as \
         the process exits); observe again from a live client",
    )
}

fn no_leader_within(limit: Duration) -> Failure {
    Failure::new(
        fencelock_status::FENCELOCK_STATUS_TIMEOUT,
        format!("no new leader within {} ms", limit.as_millis()),
    )
}

/// Takes the next leader, waiting up to `timeout_ms` (0: just look). The
/// first call returns the current leader at once if there is one.
///
/// On `FENCELOCK_STATUS_OK`, `*leader` is filled in and owns its value:
/// release it with [`fencelock_leader_clear`]. Returns
/// `FENCELOCK_STATUS_TIMEOUT` (and leaves `*leader` alone) when no new
/// leader came in time, `CLOSED` when the observation cannot go on, and
/// `WOULD_BLOCK` when called with a non-zero timeout on a thread of an
/// async runtime (use `_next_async` there).
///
/// Blocks up to `timeout_ms`. Thread-safe (see [`fencelock_observation`]).
///
/// # Safety
/// `observation` is NULL or live; `leader` and `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_observation_next(
    observation: *const fencelock_observation,
    timeout_ms: u64,
    leader: *mut fencelock_leader,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let observation = args::object(observation, "observation")?;
            let out = args::out(leader, "leader")?;
            let next = if timeout_ms == 0 {
                // Just looking never waits, so it needs no runtime and is
                // allowed on any thread.
                let next = observation.next(None);
                futures_util::FutureExt::now_or_never(next)
                    .unwrap_or_else(|| Err(no_leader_within(Duration::ZERO)))
            } else {
                fencelock::block_on(observation.next(Some(args::millis(timeout_ms))))?
            }?;
            out.write(fencelock_leader::owned(next));
            Ok(())
        })
    }
}

/// Starts waiting for the next leader and returns at once; `callback` gets
/// it (or why there is none) exactly once, on fencelock's callback thread,
/// possibly before this returns. It waits as long as it takes: cancel it
/// with `fencelock_operation_cancel`, or free the observation.
/// `operation_out`, `user_data` and the returned status as
/// [`crate::fencelock_acquire_async`]. Never blocks. Thread-safe.
///
/// # Safety
/// `observation` is NULL or live; `callback` is NULL or a function of that
/// type; `operation_out` and `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_observation_next_async(
    observation: *const fencelock_observation,
    callback: fencelock_leader_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let observation = args::object(observation, "observation")?;
            let callback = callback.ok_or_else(|| Failure::null("callback"))?;
            let finish = deliver_leader(callback, UserData(user_data));
            start(observation.next(None), finish, operation_out)
        })
    }
}

/// What ends a [`fencelock_observation_next_async`]: hands the leader (or
/// the failure) to `callback`, lending the leader for the call.
fn deliver_leader(
    callback: unsafe extern "C" fn(
        *mut c_void,
        fencelock_status,
        *const fencelock_leader,
        *mut fencelock_error,
    ),
    user_data: UserData,
) -> impl FnOnce(FfiResult<Leader>) + Send + 'static {
    move |result| {
        let (mut leader, result) = match result {
            Ok(leader) => (Some(fencelock_leader::owned(leader)), Ok(())),
            Err(failure) => (None, Err(failure)),
        };
        let (status, error) = into_status(result);
        let lent = leader.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
        // SAFETY: the caller's callback, called once with what it documents.
        unsafe { callback(user_data.get(), status, lent, error) };
        if let Some(leader) = leader.as_mut() {
            // SAFETY: made by `fencelock_leader::owned` just above.
            unsafe { fencelock_leader_clear(leader) };
        }
    }
}

/// Frees the value of a leader filled in by [`fencelock_observation_next`]
/// and zeroes the struct. NULL, or a leader cleared before, is a no-op.
/// Never blocks.
///
/// # Safety
/// `leader` is NULL or a leader this library filled in, not cleared since
/// by anything but this function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_leader_clear(leader: *mut fencelock_leader) {
    // SAFETY: per the contract.
    let Some(leader) = (unsafe { leader.as_mut() }) else {
        return;
    };
    if !leader.value.is_null() {
        let whole = std::ptr::slice_from_raw_parts_mut(leader.value, leader.value_len + 1);
        // SAFETY: made by `fencelock_leader::owned` with this length (the NUL included).
        drop(unsafe { Box::from_raw(whole) });
    }
    *leader = fencelock_leader {
        epoch: 0,
        value: std::ptr::null_mut(),
        value_len: 0,
    };
}

/// Stops observing and frees the observation: its subscriptions end, and
/// calls of `fencelock_observation_next_async` still waiting get
/// `FENCELOCK_STATUS_CANCELLED`. NULL is a no-op. No network I/O; never
/// blocks.
///
/// # Safety
/// `observation` is NULL or from [`fencelock_observe`], not freed before,
/// and not in use by another thread's `fencelock_observation_next`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_observation_free(observation: *mut fencelock_observation) {
    // SAFETY: per the contract.
    if let Some(observation) = unsafe { args::take(observation) } {
        observation.leaders.close();
    }
}

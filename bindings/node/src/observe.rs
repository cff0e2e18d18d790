//! `NativeObservation`: the core's [`Observation`] of an election behind the
//! JavaScript `Observation` (`lib/observation.js`), one `next()` at a time.
//!
//! A pending `next()` is an operation like any other: it keeps the event
//! loop alive (an observation being iterated is like an open socket), while
//! an idle observation does not. `close()`, the client's `close()` and
//! garbage collection stop it: its subscriptions end and a pending `next()`
//! resolves `null`.

use std::sync::{Arc, Mutex, MutexGuard};

use napi::Env;
use napi::bindgen_prelude::{BigInt, Buffer, PromiseRaw, ToNapiValue};
use napi_derive::napi;

use fencelock::{Canceller, Observation};

use crate::bridge;

/// A leader, as observers learn of it.
#[napi(object)]
pub struct Leader {
    /// The value the leader announced (`options.value` of its campaign).
    pub value: Buffer,
    /// Its epoch: its fencing token, larger than every earlier leader's.
    pub epoch: BigInt,
}

/// Where the core's observation is between calls.
enum Slot {
    /// Waiting for the next `next()`.
    Idle(Observation),
    /// Moved into the task of a pending `next()`.
    Busy,
    /// Stopped for good (dropped).
    Stopped,
}

/// What an observation's JavaScript object, its pending `next()` and its
/// client share: the core's observation and what stops a pending `next()`.
struct Following {
    slot: Mutex<Slot>,
    stop: Canceller,
}

impl Following {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        self.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Ends the observation: drops the core's observation (ending its
    /// subscriptions), now if idle or else as soon as the pending `next()`
    /// sees the stop. Idempotent.
    fn stop(&self) {
        let mut slot = self.slot();
        self.stop.cancel();
        // Dropped here, under the lock, so `give_back` cannot race it back in.
        *slot = Slot::Stopped;
    }

    /// Returns the observation after a `next()`, unless stopped meanwhile
    /// (then it is dropped).
    fn give_back(&self, observation: Observation) {
        let mut slot = self.slot();
        if matches!(*slot, Slot::Busy) {
            *slot = Slot::Idle(observation);
        }
    }
}

/// The native observation behind `Observation` in `lib/observation.js`
/// (made by `NativeClient#observe`).
#[napi]
pub struct NativeObservation {
    following: Arc<Following>,
}

impl NativeObservation {
    /// Wraps `observation`.
    pub(crate) fn new(observation: Observation) -> NativeObservation {
        let following = Arc::new(Following {
            slot: Mutex::new(Slot::Idle(observation)),
            stop: Canceller::new(),
        });
        NativeObservation { following }
    }
}

#[napi]
impl NativeObservation {
    /// The next leader: the current one first (if any), then each new one;
    /// a slow caller skips to the latest. Resolves `null` once the
    /// observation is stopped. One call at a time: calling again while one
    /// is pending throws.
    #[napi(ts_return_type = "Promise<Leader | null>")]
    pub fn next<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Option<Leader>>> {
        let state = bridge::state(env.raw())?;
        let mut observation = {
            let mut slot = self.following.slot();
            match std::mem::replace(&mut *slot, Slot::Busy) {
                Slot::Idle(observation) => observation,
                Slot::Stopped => {
                    *slot = Slot::Stopped;
                    drop(slot);
                    return state.promise(async { Ok(None) }, convert);
                }
                Slot::Busy => {
                    return Err(napi::Error::new(
                        napi::Status::InvalidArg,
                        "fencelock: this observation's next() is already pending; await it first",
                    ));
                }
            }
        };
        let following = self.following.clone();
        let work = async move {
            // Cancelled by `stop`: the observation is dropped here.
            let leader = following.stop.run(observation.next()).await.ok().flatten();
            if leader.is_some() {
                following.give_back(observation);
            } else {
                // Stopped, or the runtime is gone: it can never yield again.
                following.stop();
            }
            Ok(leader)
        };
        state.promise(work, convert)
    }

    /// Stops the observation: its subscriptions end and a pending `next()`
    /// resolves `null`. Idempotent.
    #[napi]
    pub fn close(&self) {
        self.following.stop();
    }
}

impl Drop for NativeObservation {
    /// Garbage-collected: nobody can read it any more, so stop following.
    /// (While a `next()` is pending, `lib/observation.js`, awaiting it,
    /// keeps the object reachable.)
    fn drop(&mut self) {
        self.following.stop();
    }
}

fn convert(
    env: napi::sys::napi_env,
    leader: Option<fencelock::Leader>,
) -> napi::Result<napi::sys::napi_value> {
    let leader = leader.map(|leader| Leader {
        value: Buffer::from(leader.value),
        epoch: BigInt::from(leader.epoch),
    });
    // SAFETY: called on the JavaScript thread of `env` (by the bridge).
    unsafe { Option::<Leader>::to_napi_value(env, leader) }
}

//! `NativeObservation`: the core's [`Observation`] of an election behind the
//! JavaScript `Observation` (`lib/observation.js`).
//!
//! A pending `next()` is an operation like any other: it keeps the event
//! loop alive (an observation being iterated is like an open socket), while
//! an idle observation does not. `close()`, the client's `close()` and
//! garbage collection stop it: its subscriptions end and a pending `next()`
//! resolves `null`.

use std::sync::Arc;

use napi::Env;
use napi::bindgen_prelude::{BigInt, Buffer, PromiseRaw, ToNapiValue};
use napi_derive::napi;

use fencelock::Observation;

use crate::bridge;

/// A leader, as observers learn of it.
#[napi(object)]
pub struct Leader {
    /// The value the leader announced (`options.value` of its campaign).
    pub value: Buffer,
    /// Its epoch: its fencing token, larger than every earlier leader's.
    pub epoch: BigInt,
}

/// The native observation behind `Observation` in `lib/observation.js`
/// (made by `NativeClient#observe`).
#[napi]
pub struct NativeObservation {
    /// Shared with the pending `next()`; the core serializes waits and
    /// `close` ends them.
    observation: Arc<Observation>,
}

impl NativeObservation {
    /// Wraps `observation`.
    pub(crate) fn new(observation: Observation) -> NativeObservation {
        NativeObservation {
            observation: Arc::new(observation),
        }
    }
}

#[napi]
impl NativeObservation {
    /// The next leader: the current one first (if any), then each new one;
    /// a slow caller skips to the latest. Resolves `null` once the
    /// observation is stopped (or its client closed). Calls take turns.
    #[napi(ts_return_type = "Promise<Leader | null>")]
    pub fn next<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Option<Leader>>> {
        let state = bridge::state(env.raw())?;
        let observation = self.observation.clone();
        state.promise(async move { Ok(observation.next().await) }, convert)
    }

    /// Stops the observation: its subscriptions end and a pending `next()`
    /// resolves `null`. Idempotent.
    #[napi]
    pub fn close(&self) {
        self.observation.close();
    }
}

impl Drop for NativeObservation {
    /// Garbage-collected: nobody can read it any more, so stop following.
    /// (While a `next()` is pending, `lib/observation.js`, awaiting it,
    /// keeps the object reachable.)
    fn drop(&mut self) {
        self.observation.close();
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

//! `NativeSemaphore`: the core's [`Semaphore`] behind the JavaScript
//! `Semaphore` (`lib/semaphore.js`).
//!
//! A permit is a core lock on one of the semaphore's permit keys, so its
//! promises resolve with the same lock handles as `NativeClient#acquire`
//! (`lib/lock.js` wraps them in the same `Lock` class), and a cancelled
//! acquire leaves nothing held, as for a lock.

use napi::Env;
use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi_derive::napi;

use fencelock::Semaphore;

use crate::bridge;
use crate::client::{NativeLockOptions, lock_promise};
use crate::lock::{Canceller, LockHandle};

/// The native semaphore behind `Semaphore` in `lib/semaphore.js` (made by
/// `NativeClient#semaphore`).
#[napi]
pub struct NativeSemaphore {
    semaphore: Semaphore,
}

impl NativeSemaphore {
    /// Wraps `semaphore`.
    pub(crate) fn new(semaphore: Semaphore) -> NativeSemaphore {
        NativeSemaphore { semaphore }
    }
}

#[napi]
impl NativeSemaphore {
    /// Takes a permit, waiting (woken when one is released) up to
    /// `options.waitMs`; rejects with `LockTimeoutError` then (or
    /// `NotAcquiredError` when it is 0), and with `InvalidArgumentError`
    /// when the semaphore is in use with another number of permits.
    /// Resolves with the permit's lock handle. `canceller` stops the wait as
    /// for `NativeClient#acquire`.
    #[napi(ts_return_type = "Promise<unknown>")]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        options: NativeLockOptions,
        canceller: Option<&Canceller>,
    ) -> napi::Result<PromiseRaw<'env, LockHandle>> {
        let options = options.to_core(env)?;
        let semaphore = self.semaphore.clone();
        let attempt = async move { semaphore.acquire(options).await.map(Some) };
        lock_promise(env, attempt, canceller)
    }

    /// One attempt (`options.waitMs` plays no part): resolves `null` when
    /// every permit is held.
    #[napi(ts_return_type = "Promise<unknown | null>")]
    pub fn try_acquire<'env>(
        &self,
        env: &'env Env,
        options: NativeLockOptions,
    ) -> napi::Result<PromiseRaw<'env, Option<LockHandle>>> {
        let options = options.to_core(env)?;
        let semaphore = self.semaphore.clone();
        let attempt = async move { semaphore.try_acquire(options).await };
        lock_promise(env, attempt, None)
    }

    /// How many permits are held now (on a majority of the nodes).
    #[napi(ts_return_type = "Promise<number>")]
    pub fn holders<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, u32>> {
        let state = bridge::state(env.raw())?;
        let semaphore = self.semaphore.clone();
        let work = async move { semaphore.holders().await };
        state.promise(work, |env, held| {
            let held = u32::try_from(held).unwrap_or(u32::MAX);
            // SAFETY: on the JavaScript thread of `env`.
            unsafe { u32::to_napi_value(env, held) }
        })
    }
}

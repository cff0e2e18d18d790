//! `NativeRwLock`: the core's [`RwLock`] behind the JavaScript `RwLock`
//! (`lib/rw-lock.js`).
//!
//! A reader's or a writer's grant is a core lock (on the reader's own key or
//! on the write key), so its promises resolve with the same lock handles as
//! `NativeClient#acquire` (`lib/lock.js` wraps them in the same `Lock`
//! class), and a cancelled acquire leaves nothing held, as for a lock.

use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;

use fencelock::RwLock;

use crate::client::{NativeLockOptions, lock_promise};
use crate::lock::{Canceller, LockHandle};

/// The native read-write lock behind `RwLock` in `lib/rw-lock.js` (made by
/// `NativeClient#rwLock`).
#[napi]
pub struct NativeRwLock {
    rw: RwLock,
}

impl NativeRwLock {
    /// Wraps `rw`.
    pub(crate) fn new(rw: RwLock) -> NativeRwLock {
        NativeRwLock { rw }
    }
}

#[napi]
impl NativeRwLock {
    /// Takes the lock for reading, beside other readers, waiting (woken when
    /// a writer releases) while a writer holds it or waits ahead, up to
    /// `options.waitMs`; rejects with `LockTimeoutError` then (or
    /// `NotAcquiredError` when it is 0). Resolves with the reader's lock
    /// handle. `canceller` stops the wait as for `NativeClient#acquire`.
    #[napi(ts_return_type = "Promise<unknown>")]
    pub fn acquire_read<'env>(
        &self,
        env: &'env Env,
        options: NativeLockOptions,
        canceller: Option<&Canceller>,
    ) -> napi::Result<PromiseRaw<'env, LockHandle>> {
        let options = options.to_core(env)?;
        let rw = self.rw.clone();
        let attempt = async move { rw.read(options).await.map(Some) };
        lock_promise(env, attempt, canceller)
    }

    /// Takes the lock for writing, alone, waiting (woken when the holders
    /// release) up to `options.waitMs`; rejects as `acquireRead`. Resolves
    /// with the writer's lock handle. `canceller` stops the wait as for
    /// `NativeClient#acquire`.
    #[napi(ts_return_type = "Promise<unknown>")]
    pub fn acquire_write<'env>(
        &self,
        env: &'env Env,
        options: NativeLockOptions,
        canceller: Option<&Canceller>,
    ) -> napi::Result<PromiseRaw<'env, LockHandle>> {
        let options = options.to_core(env)?;
        let rw = self.rw.clone();
        let attempt = async move { rw.write(options).await.map(Some) };
        lock_promise(env, attempt, canceller)
    }

    /// One attempt to read (`options.waitMs` plays no part): resolves
    /// `null` when a writer holds the lock or waits for it.
    #[napi(ts_return_type = "Promise<unknown | null>")]
    pub fn try_read<'env>(
        &self,
        env: &'env Env,
        options: NativeLockOptions,
    ) -> napi::Result<PromiseRaw<'env, Option<LockHandle>>> {
        let options = options.to_core(env)?;
        let rw = self.rw.clone();
        let attempt = async move { rw.try_read(options).await };
        lock_promise(env, attempt, None)
    }

    /// One attempt to write (`options.waitMs` plays no part): resolves
    /// `null` when anyone else holds the lock.
    #[napi(ts_return_type = "Promise<unknown | null>")]
    pub fn try_write<'env>(
        &self,
        env: &'env Env,
        options: NativeLockOptions,
    ) -> napi::Result<PromiseRaw<'env, Option<LockHandle>>> {
        let options = options.to_core(env)?;
        let rw = self.rw.clone();
        let attempt = async move { rw.try_write(options).await };
        lock_promise(env, attempt, None)
    }
}

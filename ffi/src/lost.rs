//! `fencelock_lock_on_lost`: one lock's own lost callback.
//!
//! The client's event callback (`events.rs`) tells every loss of a client's
//! locks; a binding that keeps one object per lock would then have to find
//! its lock by resource and token. This callback belongs to one lock instead,
//! and ends with it: after `fencelock_lock_free` (or replacing the callback)
//! returns, no call of it runs or can start, so its `user_data` may be freed.

use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use fencelock::Lock;
use tokio::task::AbortHandle;

use crate::args;
use crate::boundary::{FfiResult, boundary};
use crate::dispatch::{Call, Dispatcher, wait_for_replaced_calls};
use crate::error::fencelock_error;
use crate::events::fencelock_loss_reason;
use crate::lock::fencelock_lock;
use crate::operation::UserData;
use crate::status::fencelock_status;

/// Called once, on fencelock's callback thread, when the lock it was set on
/// is lost (never after a release). It may call any fencelock function,
/// `fencelock_lock_free` of this very lock included; while it runs, later
/// callbacks of the process wait.
pub type fencelock_lost_callback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, reason: fencelock_loss_reason)>;

/// One lock's lost callback, and what waiting for its calls needs.
#[derive(Default)]
pub(crate) struct LostCallback {
    state: Mutex<Slot>,
    /// Wakes callers waiting for a call of a replaced callback to return.
    idle: Condvar,
}

#[derive(Default)]
struct Slot {
    callback: Option<(unsafe extern "C" fn(*mut c_void, fencelock_loss_reason), UserData)>,
    /// Counts settings; a call of the callback set at generation `g` is a
    /// call of a replaced callback once the generation is above `g`.
    generation: u64,
    calling: Option<Call>,
    /// The task waiting for the loss on the runtime.
    watcher: Option<AbortHandle>,
}

impl LostCallback {
    fn state(&self) -> MutexGuard<'_, Slot> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sets (or, with `None`, clears) the callback of `lock`; returns once no
    /// call of the one it replaced runs, unless called from a callback.
    fn set(
        self: &Arc<Self>,
        lock: &Lock,
        callback: Option<(unsafe extern "C" fn(*mut c_void, fencelock_loss_reason), UserData)>,
    ) -> FfiResult<()> {
        let watcher = match callback {
            Some(_) => Some((Dispatcher::get()?, fencelock::runtime_handle()?)),
            None => None,
        };
        let mut state = self.state();
        state.generation += 1;
        let generation = state.generation;
        state.callback = callback;
        if let Some(old) = state.watcher.take() {
            old.abort();
        }
        if let Some((dispatcher, runtime)) = watcher {
            let (lost, slot) = (lock.lost_task(), self.clone());
            let task = runtime.spawn(async move {
                let reason = fencelock_loss_reason::from(lost.await);
                dispatcher.submit(move || slot.call(generation, reason));
            });
            state.watcher = Some(task.abort_handle());
        }
        wait_for_replaced_calls(state, &self.idle, generation, |state| state.calling);
        Ok(())
    }

    /// Clears the callback as the lock goes away.
    pub(crate) fn clear(&self) {
        let mut state = self.state();
        state.generation += 1;
        let generation = state.generation;
        state.callback = None;
        if let Some(watcher) = state.watcher.take() {
            watcher.abort();
        }
        wait_for_replaced_calls(state, &self.idle, generation, |state| state.calling);
    }

    /// On the callback thread: calls the callback set at `generation`, once,
    /// unless it was replaced or cleared meanwhile.
    fn call(&self, generation: u64, reason: fencelock_loss_reason) {
        let callback = {
            let mut state = self.state();
            if state.generation != generation {
                return;
            }
            let Some(callback) = state.callback.take() else {
                return;
            };
            state.calling = Some(Call::of(generation));
            callback
        };
        let (function, user_data) = callback;
        // SAFETY: a callback the caller registered, with its own user data.
        unsafe { function(user_data.get(), reason) };
        self.state().calling = None;
        self.idle.notify_all();
    }
}

/// Calls `callback(user_data, reason)` once when `lock` is lost, on
/// fencelock's callback thread; at once (there) if it is lost already. Never
/// called after the lock was released. A second call replaces the callback;
/// NULL clears it. Losses also reach the client's event callback and queue.
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
            let callback = callback.map(|function| (function, UserData(user_data)));
            lock.on_lost.set(&lock.inner, callback)
        })
    }
}

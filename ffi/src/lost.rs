//! `fencelock_lock_on_lost`: one lock's own lost callback.
//!
//! The client's event callback (`events.rs`) tells every loss of a client's
//! locks; a binding that keeps one object per lock would then have to find
//! its lock by resource and token. This callback belongs to one lock instead,
//! and ends with it: after `fencelock_lock_free` (or replacing the callback)
//! returns, no call of it runs or can start, so its `user_data` may be freed.

use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::args;
use crate::boundary::boundary;
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
///
/// The lock's watcher (`events::watch`) hands the loss here first: with a
/// callback set it goes to that callback only, and otherwise to the client's
/// events. So a binding that uses only per-lock callbacks never fills the
/// client's queue, which nobody polls.
#[derive(Default)]
pub(crate) struct LostCallback {
    state: Mutex<Slot>,
    /// Wakes callers waiting for a call of a replaced callback to return.
    idle: Condvar,
}

#[derive(Default)]
struct Slot {
    subscriber: Option<Subscriber>,
    /// Counts settings; a call of the callback set at generation `g` is a
    /// call of a replaced callback once the generation is above `g`.
    generation: u64,
    calling: Option<Call>,
    /// Why the lock was lost, once it was.
    lost: Option<fencelock_loss_reason>,
}

/// A callback, its user data, and the thread that calls it.
#[derive(Clone)]
struct Subscriber {
    function: unsafe extern "C" fn(*mut c_void, fencelock_loss_reason),
    user_data: UserData,
    callbacks: Arc<Dispatcher>,
}

impl Slot {
    /// Puts `subscriber` in place of the callback; returns its generation.
    fn replace(&mut self, subscriber: Option<Subscriber>) -> u64 {
        self.generation += 1;
        self.subscriber = subscriber;
        self.generation
    }
}

impl LostCallback {
    fn state(&self) -> MutexGuard<'_, Slot> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sets (or, with `None`, clears) the callback; a lock lost already is
    /// reported to the new one at once. Returns once no call of the one it
    /// replaced runs, unless called from a callback.
    fn set(self: &Arc<Self>, subscriber: Option<Subscriber>) {
        let mut state = self.state();
        let generation = state.replace(subscriber);
        if let Some(reason) = state.lost {
            self.queue_call(&state, reason);
        }
        wait_for_replaced_calls(state, &self.idle, generation, |state| state.calling);
    }

    /// Clears the callback as the lock goes away.
    pub(crate) fn clear(self: &Arc<Self>) {
        self.set(None);
    }

    /// On the runtime, when the lock is lost: queues the call of the
    /// callback and returns true, or returns false when none is set (the
    /// loss then goes to the client's events).
    pub(crate) fn take_loss(self: &Arc<Self>, reason: fencelock_loss_reason) -> bool {
        let mut state = self.state();
        state.lost = Some(reason);
        self.queue_call(&state, reason)
    }

    /// Queues the call of the current callback, if any, on the callback thread.
    fn queue_call(self: &Arc<Self>, state: &Slot, reason: fencelock_loss_reason) -> bool {
        let Some(subscriber) = &state.subscriber else {
            return false;
        };
        let (slot, generation) = (self.clone(), state.generation);
        subscriber.callbacks.submit(move || slot.call(generation, reason));
        true
    }

    /// On the callback thread: calls the callback set at `generation`, once,
    /// unless it was replaced or cleared meanwhile.
    fn call(&self, generation: u64, reason: fencelock_loss_reason) {
        let subscriber = {
            let mut state = self.state();
            if state.generation != generation {
                return;
            }
            let Some(subscriber) = state.subscriber.take() else {
                return;
            };
            state.calling = Some(Call::of(generation));
            subscriber
        };
        // SAFETY: a callback the caller registered, with its own user data.
        unsafe { (subscriber.function)(subscriber.user_data.get(), reason) };
        self.state().calling = None;
        self.idle.notify_all();
    }
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
            let subscriber = match callback {
                Some(function) => Some(Subscriber {
                    function,
                    user_data: UserData(user_data),
                    callbacks: Dispatcher::get()?,
                }),
                None => None,
            };
            lock.on_lost.set(subscriber);
            Ok(())
        })
    }
}

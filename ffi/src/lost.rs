//! One lock's own lost callback (`fencelock_lock_on_lost`), and the watcher
//! that routes a lock's loss to it or to the client's events.
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

use crate::boundary::FfiResult;
use crate::dispatch::{Call, Dispatcher, UserData, wait_for_replaced_calls};
use crate::error::c_string;
use crate::events::{EventHub, LostEvent};
use crate::loss_reason::fencelock_loss_reason;

/// Called once, on fencelock's callback thread, when the lock it was set on
/// is lost (never after a release). It may call any fencelock function,
/// `fencelock_lock_free` of this very lock included; while it runs, later
/// callbacks of the process wait.
pub type fencelock_lost_callback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, reason: fencelock_loss_reason)>;

/// One lock's lost callback, and what waiting for its calls needs.
///
/// The lock's watcher ([`watch`]) hands the loss here first: with a
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

    /// Sets `callback` (NULL: clears it) as [`crate::fencelock_lock_on_lost`]
    /// documents.
    pub(crate) fn set_callback(
        self: &Arc<Self>,
        callback: fencelock_lost_callback,
        user_data: *mut c_void,
    ) -> FfiResult {
        let subscriber = match callback {
            Some(function) => Some(Subscriber {
                function,
                user_data: UserData(user_data),
                callbacks: Dispatcher::get()?,
            }),
            None => None,
        };
        self.set(subscriber);
        Ok(())
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

/// Watches `lock` on the runtime and hands its loss to the lock's own
/// callback (`own`), or publishes it to `hub` when none is set. The returned
/// handle stops the watch (the lock's C handle aborts it when freed).
pub(crate) fn watch(lock: &Lock, hub: Arc<EventHub>, own: Arc<LostCallback>) -> FfiResult<AbortHandle> {
    let lost = lock.lost_task();
    let resource = c_string(lock.resource().to_owned());
    let fencing_token = lock.fencing_token();
    let runtime = fencelock::runtime_handle()?;
    let task = runtime.spawn(async move {
        let reason = lost.await.into();
        if !own.take_loss(reason) {
            hub.publish(LostEvent {
                resource,
                fencing_token,
                reason,
            });
        }
    });
    Ok(task.abort_handle())
}

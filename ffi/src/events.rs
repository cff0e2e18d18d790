//! Lost-lock events: delivered to a callback on the callback thread (see
//! `dispatch.rs`), or queued for `fencelock_client_next_event` so C code
//! never runs on a fencelock thread unless it asks to.

use std::collections::VecDeque;
use std::ffi::{CString, c_char, c_void};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::boundary::FfiResult;
use crate::dispatch::{Call, Dispatcher, UserData, wait_for_replaced_calls};
use crate::loss_reason::fencelock_loss_reason;

/// Events kept for `fencelock_client_next_event`; beyond this the oldest are
/// dropped (with a warning in the log) so a client nobody polls cannot grow
/// without bound.
pub const FENCELOCK_MAX_QUEUED_EVENTS: usize = 1024;

/// What happened.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum fencelock_event_kind {
    /// A held lock was lost: stop touching what it protects.
    FENCELOCK_EVENT_LOCK_LOST = 1,
}

/// One event. The lock is identified by its resource and fencing token
/// (unique per resource).
///
/// From [`fencelock_client_next_event`] the event owns `resource`: call
/// [`fencelock_event_clear`] when done. Passed to a
/// [`fencelock_event_callback`], it is borrowed for the call only.
#[repr(C)]
#[derive(Debug)]
pub struct fencelock_event {
    /// What happened.
    pub kind: fencelock_event_kind,
    /// Why the lock was lost.
    pub reason: fencelock_loss_reason,
    /// The fencing token of the lost lock.
    pub fencing_token: u64,
    /// The lock's resource, NUL-terminated UTF-8.
    pub resource: *mut c_char,
}

/// Receives a client's events on fencelock's callback thread, one call at a
/// time, in the order the losses were seen. `event` and its strings are
/// valid only during the call.
///
/// It may call any fencelock function, blocking ones included; while it
/// runs, the process's later callbacks wait (never its I/O or renewals).
pub type fencelock_event_callback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const fencelock_event)>;

/// An event on its way to C.
pub(crate) struct LostEvent {
    pub(crate) resource: CString,
    pub(crate) fencing_token: u64,
    pub(crate) reason: fencelock_loss_reason,
}

impl LostEvent {
    /// The event as C sees it, owning `resource`
    /// ([`fencelock_event_clear`] frees it).
    pub(crate) fn into_owned(self) -> fencelock_event {
        fencelock_event {
            kind: fencelock_event_kind::FENCELOCK_EVENT_LOCK_LOST,
            reason: self.reason,
            fencing_token: self.fencing_token,
            resource: self.resource.into_raw(),
        }
    }

    /// The event as C sees it, borrowing `resource` from `self`.
    fn borrowed(&self) -> fencelock_event {
        fencelock_event {
            kind: fencelock_event_kind::FENCELOCK_EVENT_LOCK_LOST,
            reason: self.reason,
            fencing_token: self.fencing_token,
            resource: self.resource.as_ptr().cast_mut(),
        }
    }
}

/// A registered event callback, and the thread that calls it.
#[derive(Clone)]
struct Subscriber {
    callback: unsafe extern "C" fn(*mut c_void, *const fencelock_event),
    user_data: UserData,
    callbacks: Arc<Dispatcher>,
}

impl Subscriber {
    fn call(&self, event: &LostEvent) {
        let c_event = event.borrowed();
        // SAFETY: a callback the caller registered, with an event valid for the call.
        unsafe { (self.callback)(self.user_data.get(), &c_event) };
    }
}

/// Where a client's events go: one queue, in the order the losses were
/// seen, emptied by the event callback when one is set and by
/// `fencelock_client_next_event` otherwise.
#[derive(Default)]
pub(crate) struct EventHub {
    state: Mutex<HubState>,
    /// Wakes `fencelock_client_next_event` callers.
    ready: Condvar,
    /// Wakes callers waiting for a call of a replaced callback to return.
    idle: Condvar,
}

#[derive(Default)]
struct HubState {
    queue: VecDeque<LostEvent>,
    subscriber: Option<Subscriber>,
    /// Counts subscriptions; a call of the callback set at generation `g`
    /// is a call of a replaced callback once the generation is above `g`.
    generation: u64,
    /// The call of the callback in progress on the callback thread, if any.
    calling: Option<Call>,
    /// A delivery is queued on the callback thread (at most one at a time).
    delivery_queued: bool,
}

impl EventHub {
    fn state(&self) -> MutexGuard<'_, HubState> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Stops calling the client's callback (its `user_data` may die with the
    /// client); returns as [`EventHub::subscribe`] does.
    pub(crate) fn unsubscribe(self: &Arc<Self>) {
        self.subscribe(None);
    }

    /// Sends events to `callback` (NULL: back to the queue) as
    /// [`crate::fencelock_client_set_event_callback`] documents.
    pub(crate) fn set_callback(
        self: &Arc<Self>,
        callback: fencelock_event_callback,
        user_data: *mut c_void,
    ) -> FfiResult {
        let subscriber = match callback {
            Some(callback) => Some(Subscriber {
                callback,
                user_data: UserData(user_data),
                callbacks: Dispatcher::get()?,
            }),
            None => None,
        };
        self.subscribe(subscriber);
        Ok(())
    }

    /// Replaces the callback; events already queued go to the new one (or
    /// stay for `fencelock_client_next_event` when there is none). Returns
    /// once no call of a replaced callback is running, unless called from
    /// the callback thread.
    fn subscribe(self: &Arc<Self>, subscriber: Option<Subscriber>) {
        let mut state = self.state();
        state.subscriber = subscriber;
        state.generation += 1;
        let generation = state.generation;
        self.queue_delivery(&mut state);
        // A puller waits only while no callback is set.
        self.ready.notify_all();
        // Later calls can only be of a newer callback: a delivery reads the
        // subscriber and marks `calling` under the same lock.
        wait_for_replaced_calls(state, &self.idle, generation, |state| state.calling);
    }

    /// Called on the runtime: queues the event and, when a callback is set,
    /// its delivery. Never calls C code, never waits for it.
    pub(crate) fn publish(self: &Arc<Self>, event: LostEvent) {
        let mut state = self.state();
        state.queue.push_back(event);
        // Without a callback nobody may ever poll: keep the newest events only.
        // With one, every event is delivered: a loss is never dropped on its way
        // to a callback (the queue grows by at most one event per lock).
        if state.subscriber.is_none() && state.queue.len() > FENCELOCK_MAX_QUEUED_EVENTS {
            state.queue.pop_front();
            tracing::warn!("fencelock event queue full: dropped the oldest event; poll it more often");
        }
        self.queue_delivery(&mut state);
        self.ready.notify_one();
    }

    /// Queues one delivery on the callback thread if a callback is set, an
    /// event waits, and no delivery is queued already.
    fn queue_delivery(self: &Arc<Self>, state: &mut HubState) {
        let Some(subscriber) = &state.subscriber else {
            return;
        };
        if state.delivery_queued || state.queue.is_empty() {
            return;
        }
        state.delivery_queued = true;
        let hub = self.clone();
        subscriber.callbacks.submit(move || hub.deliver_one());
    }

    /// On the callback thread: calls the callback with the oldest event,
    /// then queues the next delivery behind the callbacks queued meanwhile.
    /// One event per turn keeps a client with many losses from holding up
    /// other callbacks, and keeps each event behind the completions that
    /// came before it.
    fn deliver_one(self: &Arc<Self>) {
        let taken = {
            let mut state = self.state();
            state.delivery_queued = false;
            let taken = match state.subscriber.clone() {
                Some(subscriber) => state.queue.pop_front().map(|event| (subscriber, event)),
                None => None, // unsubscribed meanwhile: the events stay for pulling
            };
            if taken.is_some() {
                state.calling = Some(Call::of(state.generation));
            }
            taken
        };
        let Some((subscriber, event)) = taken else {
            return;
        };
        subscriber.call(&event);
        let mut state = self.state();
        state.calling = None;
        self.idle.notify_all();
        self.queue_delivery(&mut state);
    }

    /// Takes the oldest event, waiting up to `timeout` while there is none
    /// or a callback is set (events are then the callback's).
    pub(crate) fn next(&self, timeout: Duration) -> Option<LostEvent> {
        let state = self.state();
        let (mut state, _) = self
            .ready
            .wait_timeout_while(state, timeout, |state| {
                state.subscriber.is_some() || state.queue.is_empty()
            })
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if state.subscriber.is_some() {
            return None;
        }
        state.queue.pop_front()
    }
}

/// Frees the strings an event from [`fencelock_client_next_event`] owns and
/// zeroes it. Safe to call twice, and on a zeroed event. NULL is a no-op.
///
/// # Safety
/// `event` is NULL, zeroed, or filled in by `fencelock_client_next_event`.
/// Never call it on an event passed to a callback.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_event_clear(event: *mut fencelock_event) {
    if event.is_null() {
        return;
    }
    // Read only the pointer field: the enum fields of a zeroed event are not
    // valid Rust values, so no reference to the whole struct is made.
    // SAFETY: per the contract.
    let resource = unsafe { (*event).resource };
    if !resource.is_null() {
        // SAFETY: made by `CString::into_raw` in `fencelock_client_next_event`.
        drop(unsafe { CString::from_raw(resource) });
    }
    // SAFETY: per the contract; zero is the documented cleared state.
    unsafe { event.write_bytes(0, 1) };
}

//! Lost-lock events: delivered to a callback on the callback thread (see
//! `dispatch.rs`), or queued for `fencelock_client_next_event` so C code
//! never runs on a fencelock thread unless it asks to.

use std::collections::VecDeque;
use std::ffi::{CString, c_char, c_void};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use fencelock::{Lock, LossReason};
use tokio::task::AbortHandle;

use crate::args;
use crate::boundary::{Failure, FfiResult, boundary_status};
use crate::client::fencelock_client;
use crate::dispatch::{Call, Dispatcher, wait_for_replaced_calls};
use crate::error::c_string;
use crate::lost::LostCallback;
use crate::names;
use crate::operation::UserData;
use crate::status::fencelock_status;

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

/// Why a lock was lost (`tests/vectors/protocol.json`, `loss_reasons`).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
pub enum fencelock_loss_reason {
    /// A renewal found the key missing on a majority (deleted, evicted, node restarted empty).
    FENCELOCK_LOSS_DELETED = 1,
    /// A renewal found another owner's token on a majority.
    FENCELOCK_LOSS_TAKEN_OVER = 2,
    /// Renewals kept failing (nodes unreachable) until the validity ran out.
    FENCELOCK_LOSS_UNREACHABLE = 3,
    /// The lease ran out without renewal (auto-renew off, or a renewal limit reached).
    FENCELOCK_LOSS_EXPIRED = 4,
    /// A reason added by a later version of fencelock.
    FENCELOCK_LOSS_OTHER = 99,
}

/// What every `fencelock_loss_reason` variant's name starts with.
pub(crate) const LOSS_PREFIX: &str = "FENCELOCK_LOSS_";

impl From<LossReason> for fencelock_loss_reason {
    fn from(reason: LossReason) -> Self {
        names::by_core_name(LOSS_PREFIX, reason.name()).unwrap_or(fencelock_loss_reason::FENCELOCK_LOSS_OTHER)
    }
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
struct LostEvent {
    resource: CString,
    fencing_token: u64,
    reason: fencelock_loss_reason,
}

impl LostEvent {
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
    fn publish(self: &Arc<Self>, event: LostEvent) {
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
    fn next(&self, timeout: Duration) -> Option<LostEvent> {
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

/// Sends this client's events to `callback` (on fencelock's callback thread)
/// instead of the queue; NULL goes back to queueing. Events queued before
/// are delivered to the new callback first, in order; with NULL, events not
/// delivered yet stay queued for [`fencelock_client_next_event`].
///
/// `user_data` is passed back untouched and must be usable from another
/// thread. When this returns, no call of the callback it replaced (or
/// cleared) is running or can start, so the old `user_data` may be freed
/// right away: for that it waits while such a call is in progress (so do not
/// call it while holding a lock that callback takes). Called from inside a
/// fencelock callback it returns at once: calls run one at a time, so the
/// only call that can be in progress is the caller's own. A callback may thus
/// clear itself and free its own `user_data`, as long as it does not touch
/// it afterwards.
///
/// Fails with `FENCELOCK_STATUS_CLOSED` if the callback thread cannot be
/// started. Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `callback` is NULL or a function with this signature.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_set_event_callback(
    client: *const fencelock_client,
    callback: fencelock_event_callback,
    user_data: *mut c_void,
) -> fencelock_status {
    boundary_status(|| {
        // SAFETY: per the contract.
        let client = unsafe { args::object(client, "client") }?;
        let subscriber = match callback {
            Some(callback) => Some(Subscriber {
                callback,
                user_data: UserData(user_data),
                callbacks: Dispatcher::get()?,
            }),
            None => None,
        };
        client.events.subscribe(subscriber);
        Ok(())
    })
}

/// Takes the next queued event, waiting up to `timeout_ms` (0: just look).
///
/// On `FENCELOCK_STATUS_OK`, `*event` is filled in and owns its `resource`
/// string: release it with [`fencelock_event_clear`]. Returns
/// `FENCELOCK_STATUS_TIMEOUT` (and leaves `*event` alone) when no event came
/// in time, and `FENCELOCK_STATUS_WOULD_BLOCK` when called with a non-zero
/// timeout on a thread of an async runtime. While an event callback is set,
/// events are the callback's: this finds none.
///
/// Blocks the calling thread up to `timeout_ms` (from a fencelock callback
/// too, holding up later callbacks). Thread-safe: each event goes to exactly
/// one caller.
///
/// # Safety
/// `client` is NULL or live; `event` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_next_event(
    client: *const fencelock_client,
    timeout_ms: u64,
    event: *mut fencelock_event,
) -> fencelock_status {
    boundary_status(|| {
        // SAFETY: per the contract.
        let client = unsafe { args::object(client, "client") }?;
        let out = args::out(event, "event")?;
        if timeout_ms > 0 && tokio::runtime::Handle::try_current().is_ok() {
            return Err(Failure::new(
                fencelock_status::FENCELOCK_STATUS_WOULD_BLOCK,
                "fencelock_client_next_event would block a thread of an async runtime; poll with timeout 0 here",
            ));
        }
        let next = client.events.next(args::millis(timeout_ms)).ok_or_else(|| {
            Failure::new(
                fencelock_status::FENCELOCK_STATUS_TIMEOUT,
                format!("no event within {timeout_ms} ms"),
            )
        })?;
        let c_event = fencelock_event {
            kind: fencelock_event_kind::FENCELOCK_EVENT_LOCK_LOST,
            reason: next.reason,
            fencing_token: next.fencing_token,
            resource: next.resource.into_raw(),
        };
        // SAFETY: checked non-NULL; the caller promised it is writable.
        unsafe { out.write(c_event) };
        Ok(())
    })
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

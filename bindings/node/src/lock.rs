//! `NativeLock` (a held lock) and `Canceller` (stops a waiting acquire).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use napi::bindgen_prelude::{BigInt, Function, ObjectFinalize, PromiseRaw};
use napi::{Env, JsValue};
use napi_derive::napi;
use tokio::sync::Notify;

use fencelock::{Lock, LockStatus, LossReason};

use crate::args::millis;
use crate::bridge;
use crate::client::undefined;

/// A loss reason as the JavaScript layer names it.
pub(crate) fn reason_name(reason: LossReason) -> &'static str {
    match reason {
        LossReason::Deleted => "deleted",
        LossReason::TakenOver => "taken_over",
        LossReason::Unreachable => "unreachable",
        LossReason::Expired => "expired",
        _ => "lost",
    }
}

/// A lost-lock watcher: its callback id and its task on the core's runtime.
struct Watcher {
    id: u64,
    task: tokio::task::AbortHandle,
}

/// The native lock behind `Lock` in `index.js`. When it is garbage-collected
/// without release, renewal stops and the key expires at its ttl.
#[napi(js_name = "Lock", custom_finalize)]
pub struct NativeLock {
    lock: Lock,
    watcher: Option<Watcher>,
}

impl NativeLock {
    pub(crate) fn new(lock: Lock) -> Self {
        NativeLock { lock, watcher: None }
    }
}

fn stop_watcher(env: &Env, watcher: Option<Watcher>) {
    if let Some(watcher) = watcher {
        watcher.task.abort();
        if let Ok(state) = bridge::state(env.raw()) {
            state.unwatch(watcher.id);
        }
    }
}

#[napi]
impl NativeLock {
    /// The fencing token, strictly greater than every earlier holder's.
    #[napi(getter)]
    pub fn fencing_token(&self) -> BigInt {
        BigInt::from(self.lock.fencing_token())
    }

    /// The resource this lock protects.
    #[napi(getter)]
    pub fn resource(&self) -> String {
        self.lock.resource().to_owned()
    }

    /// True while held and its validity (local monotonic clock) has not run out.
    #[napi]
    pub fn is_held(&self) -> bool {
        self.lock.is_held()
    }

    /// Whole milliseconds the lock stays valid without another renewal; 0 when not held.
    #[napi(getter)]
    pub fn remaining_ms(&self) -> f64 {
        self.lock.remaining().as_millis() as f64
    }

    /// `"held"`, `"released"`, or `"lost:<reason>"` (`deleted`, `taken_over`,
    /// `unreachable`, `expired`).
    #[napi(getter)]
    pub fn status(&self) -> String {
        match self.lock.status() {
            LockStatus::Held => "held".to_owned(),
            LockStatus::Released => "released".to_owned(),
            LockStatus::Lost(reason) => format!("lost:{}", reason_name(reason)),
            _ => "unknown".to_owned(),
        }
    }

    /// How many times the watchdog has renewed the lock.
    #[napi(getter)]
    pub fn renewals(&self) -> u32 {
        self.lock.renewals()
    }

    /// Calls `callback(reason)` once, on the JavaScript thread, when the lock
    /// is lost (never after a clean release). Does not keep the process alive.
    #[napi(ts_args_type = "callback: (reason: string) => void")]
    pub fn watch_lost(&mut self, env: &Env, callback: Function<'_>) -> napi::Result<()> {
        let state = bridge::state(env.raw())?;
        stop_watcher(env, self.watcher.take());
        let lost = self.lock.lost_task();
        let (id, task) = state.watch(callback.raw(), async move { reason_name(lost.await).to_owned() })?;
        self.watcher = Some(Watcher { id, task });
        Ok(())
    }

    /// Sets the ttl to `ttlMs` from now on a majority, by compare-and-pexpire.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn extend<'env>(&self, env: &'env Env, ttl_ms: f64) -> napi::Result<PromiseRaw<'env, ()>> {
        let ttl = millis(env, "ms", ttl_ms)?;
        let state = bridge::state(env.raw())?;
        state.promise(self.lock.extend_task(ttl), |env, ()| undefined(env))
    }

    /// Releases the lock on every node and stops renewal and the loss watcher.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn release<'env>(&mut self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let state = bridge::state(env.raw())?;
        let watcher = self.watcher.take().map(|w| (w.id, w.task));
        state.promise(self.lock.release_task(), move |env, ()| {
            // After the release settles: a loss queued before it still fires.
            if let Some((id, task)) = watcher {
                task.abort();
                if let Ok(state) = bridge::state(env) {
                    state.unwatch(id);
                }
            }
            undefined(env)
        })
    }
}

impl ObjectFinalize for NativeLock {
    fn finalize(mut self, env: Env) -> napi::Result<()> {
        stop_watcher(&env, self.watcher.take());
        // Dropping `self.lock` stops renewal without I/O; the key expires at its ttl.
        Ok(())
    }
}

/// The flag a [`Canceller`] raises.
pub(crate) struct CancelFlag {
    raised: AtomicBool,
    notify: Notify,
}

impl CancelFlag {
    /// Resolves once the flag is raised.
    pub(crate) async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.raised.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

/// Cancels a waiting `acquire` (the JavaScript layer wires it to an `AbortSignal`).
#[napi]
pub struct Canceller {
    flag: Arc<CancelFlag>,
}

impl Default for Canceller {
    fn default() -> Self {
        Self::new()
    }
}

#[napi]
impl Canceller {
    /// A canceller not yet raised.
    #[napi(constructor)]
    pub fn new() -> Self {
        Canceller {
            flag: Arc::new(CancelFlag {
                raised: AtomicBool::new(false),
                notify: Notify::new(),
            }),
        }
    }

    /// Stops the acquire this canceller was given to.
    #[napi]
    pub fn cancel(&self) {
        self.flag.raised.store(true, Ordering::Release);
        self.flag.notify.notify_waiters();
    }
}

impl Canceller {
    pub(crate) fn flag(&self) -> Arc<CancelFlag> {
        self.flag.clone()
    }
}

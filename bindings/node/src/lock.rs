//! A held lock behind the JavaScript `Lock` (a lock handle and the `lock*`
//! functions that take it), and `Canceller` (stops a waiting acquire).
//!
//! The handle is a plain napi external, not a `#[napi]` class instance: a
//! class instance costs a constructor call, `napi_wrap` and napi-rs's
//! per-call borrow bookkeeping, the biggest cost of the JavaScript thread in
//! an acquire+release loop (docs/performance.md). `lib/lock.js` keeps the handle in
//! a private field of its `Lock` class, so user code never sees it.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::c_void;
use std::ptr;

use napi::bindgen_prelude::{BigInt, FromNapiValue, Function, PromiseRaw};
use napi::{Env, JsValue, Status, sys};
use napi_derive::napi;

use fencelock::{Lock, LockStatus};

use crate::args::millis;
use crate::bridge;
use crate::values::undefined;

/// A lost-lock watcher: its callback id and its task on the core's runtime.
struct Watcher {
    id: u64,
    task: tokio::task::AbortHandle,
}

/// What a lock handle points to. Only ever touched on the JavaScript thread
/// that made it (externals cannot cross to another thread's environment).
struct NativeLock {
    lock: Lock,
    watcher: RefCell<Option<Watcher>>,
}

thread_local! {
    /// The live handles of this thread: a handle is only dereferenced after
    /// it is found here, so a foreign or finalized external is refused, not
    /// read.
    static LIVE: RefCell<HashSet<usize>> = RefCell::new(HashSet::new());
}

/// A new lock handle (a JavaScript external) owning `lock`. When the handle
/// is garbage-collected without release, renewal stops and the key expires
/// at its ttl.
pub(crate) fn handle(env: sys::napi_env, lock: Lock) -> napi::Result<sys::napi_value> {
    let native = Box::into_raw(Box::new(NativeLock {
        lock,
        watcher: RefCell::new(None),
    }));
    let mut value = ptr::null_mut();
    // SAFETY: on the JavaScript thread of `env`; `finalize` takes the box back.
    let status =
        unsafe { sys::napi_create_external(env, native.cast(), Some(finalize), ptr::null_mut(), &mut value) };
    if status != sys::Status::napi_ok {
        // SAFETY: the external was not made, so nothing else owns the box.
        drop(unsafe { Box::from_raw(native) });
        return Err(napi::Error::new(
            Status::GenericFailure,
            format!("fencelock: creating a lock handle failed (napi status {status})"),
        ));
    }
    LIVE.with(|live| live.borrow_mut().insert(native as usize));
    Ok(value)
}

/// The handle was garbage-collected: stop the watcher and drop the lock
/// (which stops renewal without I/O).
unsafe extern "C" fn finalize(env: sys::napi_env, data: *mut c_void, _: *mut c_void) {
    let _ = LIVE.try_with(|live| live.borrow_mut().remove(&(data as usize)));
    // SAFETY: `data` is the box made in `handle`, finalized once by Node.
    let native = unsafe { Box::from_raw(data.cast::<NativeLock>()) };
    stop_watcher(env, native.watcher.take());
}

fn stop_watcher(env: sys::napi_env, watcher: Option<Watcher>) {
    if let Some(watcher) = watcher {
        watcher.task.abort();
        if !env.is_null()
            && let Ok(state) = bridge::state(env)
        {
            state.unwatch(watcher.id);
        }
    }
}

/// A lock handle passed back from JavaScript, checked to be a live one of
/// this thread.
pub struct LockHandle(&'static NativeLock);

impl FromNapiValue for LockHandle {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        let mut data = ptr::null_mut();
        // SAFETY: `value` is an argument of the current call; a non-external fails here.
        let status = unsafe { sys::napi_get_value_external(env, value, &mut data) };
        let live =
            status == sys::Status::napi_ok && LIVE.with(|live| live.borrow().contains(&(data as usize)));
        if !live {
            return Err(napi::Error::new(
                Status::InvalidArg,
                "fencelock: not a lock handle (use the Lock objects the client returns)",
            ));
        }
        // SAFETY: a live handle of this thread; it stays alive for the call,
        // being one of its arguments (reachable, so not finalized).
        Ok(LockHandle(unsafe { &*data.cast::<NativeLock>() }))
    }
}

/// The fencing token, strictly greater than every earlier holder's.
#[napi(ts_args_type = "handle: unknown")]
pub fn lock_fencing_token(handle: LockHandle) -> BigInt {
    BigInt::from(handle.0.lock.fencing_token())
}

/// This grant's holder id, for fenced writes (`lock.fence`).
#[napi(ts_args_type = "handle: unknown")]
pub fn lock_holder(handle: LockHandle) -> BigInt {
    BigInt::from(handle.0.lock.fence().holder)
}

/// Which permit (0-based) a semaphore's permit holds; `null` for a plain lock.
#[napi(ts_args_type = "handle: unknown")]
pub fn lock_permit(handle: LockHandle) -> Option<u32> {
    handle.0.lock.permit()
}

/// The resource this lock protects.
#[napi(ts_args_type = "handle: unknown")]
pub fn lock_resource(handle: LockHandle) -> String {
    handle.0.lock.resource().to_owned()
}

/// True while held and its validity (local monotonic clock) has not run out.
#[napi(ts_args_type = "handle: unknown")]
pub fn lock_is_held(handle: LockHandle) -> bool {
    handle.0.lock.is_held()
}

/// Whole milliseconds the lock stays valid without another renewal; 0 when not held.
#[napi(ts_args_type = "handle: unknown")]
pub fn lock_remaining_ms(handle: LockHandle) -> f64 {
    handle.0.lock.remaining().as_millis() as f64
}

/// `"held"`, `"released"`, or `"lost:<reason>"` (`deleted`, `taken_over`,
/// `unreachable`, `expired`).
#[napi(ts_args_type = "handle: unknown")]
pub fn lock_status(handle: LockHandle) -> String {
    match handle.0.lock.status() {
        LockStatus::Held => "held".to_owned(),
        LockStatus::Released => "released".to_owned(),
        LockStatus::Lost(reason) => format!("lost:{}", reason.name()),
        _ => "unknown".to_owned(),
    }
}

/// How many times the watchdog has renewed the lock.
#[napi(ts_args_type = "handle: unknown")]
pub fn lock_renewals(handle: LockHandle) -> u32 {
    handle.0.lock.renewals()
}

/// Calls `callback(reason)` once, on the JavaScript thread, when the lock
/// is lost (never after a clean release). Does not keep the process alive.
#[napi(ts_args_type = "handle: unknown, callback: (reason: string) => void")]
pub fn lock_watch_lost(env: &Env, handle: LockHandle, callback: Function<'_>) -> napi::Result<()> {
    let state = bridge::state(env.raw())?;
    let native = handle.0;
    stop_watcher(env.raw(), native.watcher.take());
    let lost = native.lock.lost_task();
    let (id, task) = state.watch(callback.raw(), async move { lost.await.name().to_owned() })?;
    *native.watcher.borrow_mut() = Some(Watcher { id, task });
    Ok(())
}

/// Sets the ttl to `ttlMs` from now on a majority, by compare-and-pexpire.
#[napi(
    ts_args_type = "handle: unknown, ttlMs: number",
    ts_return_type = "Promise<void>"
)]
pub fn lock_extend<'env>(
    env: &'env Env,
    handle: LockHandle,
    ttl_ms: f64,
) -> napi::Result<PromiseRaw<'env, ()>> {
    let ttl = millis(env, "ms", ttl_ms)?;
    let state = bridge::state(env.raw())?;
    state.promise(handle.0.lock.extend_task(ttl), |env, ()| undefined(env))
}

/// Releases the lock on every node and stops renewal and the loss watcher.
#[napi(ts_args_type = "handle: unknown", ts_return_type = "Promise<void>")]
pub fn lock_release<'env>(env: &'env Env, handle: LockHandle) -> napi::Result<PromiseRaw<'env, ()>> {
    let state = bridge::state(env.raw())?;
    let watcher = handle.0.watcher.take();
    state.promise(handle.0.lock.release_task(), move |env, ()| {
        // After the release settles: a loss queued before it still fires.
        stop_watcher(env, watcher);
        undefined(env)
    })
}

/// Cancels a waiting `acquire` (the JavaScript layer wires it to an
/// `AbortSignal`): the core's [`fencelock::Canceller`].
#[napi]
#[derive(Default)]
pub struct Canceller {
    inner: fencelock::Canceller,
}

#[napi]
impl Canceller {
    /// A canceller not yet raised.
    #[napi(constructor)]
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops the acquire this canceller was given to.
    #[napi]
    pub fn cancel(&self) {
        self.inner.cancel();
    }
}

impl Canceller {
    /// The core's canceller, to run an operation under.
    pub(crate) fn core(&self) -> fencelock::Canceller {
        self.inner.clone()
    }
}

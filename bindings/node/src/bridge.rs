//! Promises and callbacks settled from fencelock's runtime.
//!
//! Every operation runs on the core's one internal tokio runtime
//! ([`fencelock::runtime_handle`]); nothing here starts a second one. A
//! finished operation hands a [`Job`] to its Node environment's inbox, and one
//! threadsafe function per environment wakes the JavaScript thread, which
//! runs every queued job in one go (one wake-up for a whole batch of
//! settlements, not one per promise).
//!
//! The threadsafe function keeps the event loop alive only while a promise is
//! pending: it is referenced when the count of pending operations goes from
//! 0 to 1 and unreferenced when it returns to 0. Lost-lock watchers are not
//! counted, so a process whose only remaining business is a held lock (or a
//! closed client) exits by itself.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_void;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::ptr;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use napi::bindgen_prelude::{FromNapiValue, PromiseRaw, ToNapiValue};
use napi::{Status, sys};

use crate::errors;

/// Work to run on the JavaScript thread, given its environment.
type Run = Box<dyn FnOnce(sys::napi_env) + Send>;

/// One queued piece of work.
struct Job {
    run: Run,
    /// Whether it settles a pending operation (which keeps the loop alive).
    settles: bool,
}

/// A raw threadsafe function; calling one from any thread is its purpose.
#[derive(Clone, Copy)]
struct Tsfn(sys::napi_threadsafe_function);

// SAFETY: napi documents threadsafe functions as callable from any thread;
// the pointer is only used through the napi calls made for that.
unsafe impl Send for Tsfn {}

/// The queue a runtime task writes to and the JavaScript thread drains.
struct Inbox {
    state: Mutex<InboxState>,
}

struct InboxState {
    jobs: Vec<Job>,
    /// `None` once the environment is torn down: jobs are then dropped.
    tsfn: Option<Tsfn>,
    /// Whether a wake-up is already on its way.
    scheduled: bool,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, InboxState> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `job`; wakes the JavaScript thread if no wake-up is pending.
    fn push(&self, job: Job) {
        let mut state = self.lock();
        let Some(tsfn) = state.tsfn else { return };
        state.jobs.push(job);
        if !state.scheduled {
            state.scheduled = true;
            // SAFETY: the threadsafe function is alive while `state.tsfn` is
            // set: the teardown hook clears it under this lock before releasing it.
            let status = unsafe {
                sys::napi_call_threadsafe_function(
                    tsfn.0,
                    ptr::null_mut(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            };
            if status != sys::Status::napi_ok {
                // Closing: the environment is going away and nobody will read the jobs.
                state.jobs.clear();
                state.tsfn = None;
            }
        }
    }
}

/// The sending side of an environment's inbox, for runtime tasks.
#[derive(Clone)]
pub(crate) struct Sender(Arc<Inbox>);

impl Sender {
    fn send(&self, run: Run, settles: bool) {
        self.0.push(Job { run, settles });
    }
}

/// Operations submitted from the JavaScript thread, handed to the runtime in
/// bursts: the first submission of a burst (every promise that one drain's
/// callbacks start) spawns one task, and that task drives the whole burst.
///
/// Driving a burst in one task rather than spawning a task per operation is
/// what lets its requests leave together: each operation runs up to its
/// first reply before the connection's writer task gets the thread, so the
/// writer finds them all queued and sends them in one system call. With a
/// task each, tokio runs the writer right after every single operation and
/// each request costs its own `writev` (docs/performance.md has the
/// numbers). Every operation catches its
/// own panic (see [`EnvState::promise`]), so one cannot take its burst down.
struct Outbox {
    state: Mutex<(Vec<BoxedTask>, bool)>,
}

type BoxedTask = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

impl Outbox {
    fn submit(self: &Arc<Self>, runtime: &tokio::runtime::Handle, task: BoxedTask) {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.0.push(task);
        if !state.1 {
            state.1 = true;
            drop(state);
            let outbox = self.clone();
            runtime.spawn(async move {
                let tasks = {
                    let mut state = outbox
                        .state
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    state.1 = false;
                    std::mem::take(&mut state.0)
                };
                let mut burst: FuturesUnordered<BoxedTask> = tasks.into_iter().collect();
                while burst.next().await.is_some() {}
            });
        }
    }
}

/// What one Node environment (the main thread or a worker) keeps on its
/// JavaScript thread.
pub(crate) struct EnvState {
    env: sys::napi_env,
    tsfn: Tsfn,
    sender: Sender,
    runtime: tokio::runtime::Handle,
    outbox: Arc<Outbox>,
    /// Operations whose promise is not settled yet.
    pending: Cell<usize>,
    /// `(kind, message, resource, nodes) => Error`, from the JavaScript layer.
    error_factory: Cell<sys::napi_ref>,
    /// `(error) => void`: where an exception thrown by a callback goes.
    reporter: Cell<sys::napi_ref>,
    /// `() => void`: called after settling promises, so the event loop keeps
    /// polling while replies are still due.
    keep_polling: Cell<sys::napi_ref>,
    /// Lost-lock callbacks by watcher id (strong references).
    callbacks: RefCell<HashMap<u64, sys::napi_ref>>,
    next_id: Cell<u64>,
}

thread_local! {
    /// One environment per JavaScript thread (Node runs each worker on its own thread).
    static STATE: RefCell<Option<Rc<EnvState>>> = const { RefCell::new(None) };
    /// The environment of this thread that is being (or was) torn down:
    /// finalizers that run during teardown must not build a new state for it.
    static TORN_DOWN: Cell<sys::napi_env> = const { Cell::new(ptr::null_mut()) };
}

/// The environment's state, created on first use.
pub(crate) fn state(env: sys::napi_env) -> napi::Result<Rc<EnvState>> {
    if let Some(state) = STATE.with(|s| s.borrow().clone())
        && state.env == env
    {
        return Ok(state);
    }
    if TORN_DOWN.with(Cell::get) == env {
        return Err(napi::Error::new(
            Status::Closing,
            "fencelock: the Node environment is shutting down",
        ));
    }
    let state = Rc::new(EnvState::new(env)?);
    STATE.with(|s| *s.borrow_mut() = Some(state.clone()));
    Ok(state)
}

fn check(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(
            Status::GenericFailure,
            format!("fencelock: {what} failed (napi status {status})"),
        ))
    }
}

impl EnvState {
    fn new(env: sys::napi_env) -> napi::Result<EnvState> {
        let runtime = fencelock::runtime_handle()
            .map_err(|e| napi::Error::new(Status::GenericFailure, e.to_string()))?;
        let inbox = Arc::new(Inbox {
            state: Mutex::new(InboxState {
                jobs: Vec::new(),
                tsfn: None,
                scheduled: false,
            }),
        });
        let mut name = ptr::null_mut();
        let label = "fencelock";
        // SAFETY: `env` is the live environment of this call; the string is valid UTF-8.
        check(
            unsafe {
                sys::napi_create_string_utf8(env, label.as_ptr().cast(), label.len() as isize, &mut name)
            },
            "creating a string",
        )?;
        let context = Arc::into_raw(inbox.clone()) as *mut c_void;
        let mut raw = ptr::null_mut();
        // SAFETY: no JavaScript function (jobs run through `drain`); `context`
        // is a strong reference to the inbox that `finalize_inbox` gives back.
        let status = unsafe {
            sys::napi_create_threadsafe_function(
                env,
                ptr::null_mut(),
                ptr::null_mut(),
                name,
                0,
                1,
                context,
                Some(finalize_inbox),
                context,
                Some(drain),
                &mut raw,
            )
        };
        if status != sys::Status::napi_ok {
            // SAFETY: the threadsafe function was not made, so its finalizer will not run.
            drop(unsafe { Arc::from_raw(context as *const Inbox) });
            check(status, "creating a threadsafe function")?;
        }
        let tsfn = Tsfn(raw);
        inbox.lock().tsfn = Some(tsfn);
        // Idle until an operation is pending: never keeps the loop alive by itself.
        // SAFETY: on the JavaScript thread of `env`, which owns the function.
        check(unsafe { sys::napi_unref_threadsafe_function(env, raw) }, "unref")?;
        let hook = Arc::into_raw(inbox.clone()) as *mut c_void;
        // SAFETY: `hook` is a strong reference that `on_teardown` gives back.
        check(
            unsafe { sys::napi_add_env_cleanup_hook(env, Some(on_teardown), hook) },
            "adding a cleanup hook",
        )?;
        Ok(EnvState {
            env,
            tsfn,
            sender: Sender(inbox),
            runtime,
            outbox: Arc::new(Outbox {
                state: Mutex::new((Vec::new(), false)),
            }),
            pending: Cell::new(0),
            error_factory: Cell::new(ptr::null_mut()),
            reporter: Cell::new(ptr::null_mut()),
            keep_polling: Cell::new(ptr::null_mut()),
            callbacks: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
        })
    }

    /// Installs the JavaScript hooks: the error factory, the reporter of
    /// exceptions thrown by callbacks, and the keep-polling hook.
    pub(crate) fn set_hooks(
        &self,
        factory: sys::napi_value,
        reporter: sys::napi_value,
        keep_polling: sys::napi_value,
    ) -> napi::Result<()> {
        self.replace_ref(&self.error_factory, factory)?;
        self.replace_ref(&self.reporter, reporter)?;
        self.replace_ref(&self.keep_polling, keep_polling)
    }

    fn replace_ref(&self, slot: &Cell<sys::napi_ref>, value: sys::napi_value) -> napi::Result<()> {
        let mut reference = ptr::null_mut();
        // SAFETY: `value` is a live value of this environment.
        check(
            unsafe { sys::napi_create_reference(self.env, value, 1, &mut reference) },
            "referencing a hook",
        )?;
        let old = slot.replace(reference);
        if !old.is_null() {
            // SAFETY: a reference this state created.
            unsafe { sys::napi_delete_reference(self.env, old) };
        }
        Ok(())
    }

    fn get_ref(&self, slot: &Cell<sys::napi_ref>) -> Option<sys::napi_value> {
        let reference = slot.get();
        if reference.is_null() {
            return None;
        }
        let mut value = ptr::null_mut();
        // SAFETY: a live reference of this environment.
        let status = unsafe { sys::napi_get_reference_value(self.env, reference, &mut value) };
        (status == sys::Status::napi_ok && !value.is_null()).then_some(value)
    }

    /// The error factory, if installed.
    pub(crate) fn error_factory(&self) -> Option<sys::napi_value> {
        self.get_ref(&self.error_factory)
    }

    /// The callback-exception reporter, if installed.
    pub(crate) fn reporter(&self) -> Option<sys::napi_value> {
        self.get_ref(&self.reporter)
    }

    /// Operations whose promise is not settled yet.
    pub(crate) fn pending(&self) -> usize {
        self.pending.get()
    }

    /// Tells the JavaScript layer that a drain settled promises (see
    /// `keepPolling` in `lib/polling.js`): their callbacks often start more.
    fn keep_polling(&self) {
        let Some(hook) = self.get_ref(&self.keep_polling) else {
            return;
        };
        // SAFETY: on the JavaScript thread of this environment, inside the drain's scope.
        unsafe {
            let mut undefined = ptr::null_mut();
            sys::napi_get_undefined(self.env, &mut undefined);
            let mut ignored = ptr::null_mut();
            sys::napi_call_function(self.env, undefined, hook, 0, ptr::null(), &mut ignored);
        }
        report_pending_exception(self.env);
    }

    fn begin(&self) {
        let pending = self.pending.get();
        if pending == 0 {
            // SAFETY: on the JavaScript thread of the function's environment.
            unsafe { sys::napi_ref_threadsafe_function(self.env, self.tsfn.0) };
        }
        self.pending.set(pending + 1);
    }

    fn end(&self) {
        let pending = self.pending.get().saturating_sub(1);
        self.pending.set(pending);
        if pending == 0 {
            // SAFETY: on the JavaScript thread of the function's environment.
            unsafe { sys::napi_unref_threadsafe_function(self.env, self.tsfn.0) };
        }
    }

    /// Runs `future` on the core's runtime and returns a promise settled
    /// with its result: `Ok` through `convert` (on the JavaScript thread),
    /// a core error as the JavaScript error class of its kind. A panic in
    /// the future rejects the promise instead of leaving it pending.
    pub(crate) fn promise<'env, T, V, F, C>(&self, future: F, convert: C) -> napi::Result<PromiseRaw<'env, T>>
    where
        F: Future<Output = fencelock::Result<V>> + Send + 'static,
        V: Send + 'static,
        C: FnOnce(sys::napi_env, V) -> napi::Result<sys::napi_value> + Send + 'static,
    {
        let mut deferred = ptr::null_mut();
        let mut promise = ptr::null_mut();
        // SAFETY: the live environment of this call.
        check(
            unsafe { sys::napi_create_promise(self.env, &mut deferred, &mut promise) },
            "creating a promise",
        )?;
        let deferred = Deferred(deferred);
        let sender = self.sender.clone();
        self.begin();
        // Combinators, not an async block: the operation's future is then
        // polled where it was built, never moved into a block's state.
        let task = AssertUnwindSafe(future).catch_unwind().map(move |result| {
            let result = result.unwrap_or_else(|_| Err(internal_panic()));
            sender.send(Box::new(move |env| deferred.settle(env, result, convert)), true);
        });
        self.outbox.submit(&self.runtime, Box::pin(task));
        // SAFETY: a promise value of this environment.
        unsafe { PromiseRaw::from_napi_value(self.env, promise) }
    }

    /// Spawns a watcher: when `lost` resolves, `callback` is called on the
    /// JavaScript thread with the loss reason. The watcher does not keep the
    /// event loop alive. Returns its id for [`EnvState::unwatch`] and the
    /// task to abort when the lock is released or collected.
    pub(crate) fn watch<F>(
        &self,
        callback: sys::napi_value,
        lost: F,
    ) -> napi::Result<(u64, tokio::task::AbortHandle)>
    where
        F: Future<Output = String> + Send + 'static,
    {
        let mut reference = ptr::null_mut();
        // SAFETY: `callback` is a live value of this environment.
        check(
            unsafe { sys::napi_create_reference(self.env, callback, 1, &mut reference) },
            "referencing the callback",
        )?;
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.callbacks.borrow_mut().insert(id, reference);
        let sender = self.sender.clone();
        let task = self.runtime.spawn(async move {
            let reason = lost.await;
            sender.send(Box::new(move |env| fire(env, id, &reason)), false);
        });
        Ok((id, task.abort_handle()))
    }

    /// Forgets watcher `id`'s callback (after release, or when the lock is collected).
    pub(crate) fn unwatch(&self, id: u64) {
        if let Some(reference) = self.callbacks.borrow_mut().remove(&id) {
            // SAFETY: a reference this state created, deleted once (removed from the map).
            unsafe { sys::napi_delete_reference(self.env, reference) };
        }
    }
}

/// A raw promise resolver, only ever used on its environment's thread.
struct Deferred(sys::napi_deferred);

// SAFETY: the pointer crosses threads untouched and is used (once) only on
// the JavaScript thread, in `settle`.
unsafe impl Send for Deferred {}

impl Deferred {
    fn settle<V, C>(self, env: sys::napi_env, result: fencelock::Result<V>, convert: C)
    where
        C: FnOnce(sys::napi_env, V) -> napi::Result<sys::napi_value>,
    {
        let (ok, value) = match result
            .map_err(Outcome::Core)
            .and_then(|v| convert(env, v).map_err(Outcome::Napi))
        {
            Ok(value) => (true, value),
            Err(Outcome::Core(err)) => (false, errors::to_js(env, &err)),
            Err(Outcome::Napi(err)) => (false, errors::plain(env, &err.reason)),
        };
        // SAFETY: the deferred of this environment, settled exactly once.
        unsafe {
            if ok {
                sys::napi_resolve_deferred(env, self.0, value);
            } else {
                sys::napi_reject_deferred(env, self.0, value);
            }
        }
    }
}

enum Outcome {
    Core(fencelock::Error),
    Napi(napi::Error),
}

fn internal_panic() -> fencelock::Error {
    fencelock::Error::panicked("an internal fencelock task")
}

/// Calls watcher `id`'s callback with `reason`, once.
fn fire(env: sys::napi_env, id: u64, reason: &str) {
    let Ok(state) = state(env) else { return };
    let Some(reference) = state.callbacks.borrow_mut().remove(&id) else {
        return; // released or collected meanwhile
    };
    let mut callback = ptr::null_mut();
    // SAFETY: a live reference of this environment; deleted right after use.
    unsafe {
        sys::napi_get_reference_value(env, reference, &mut callback);
        sys::napi_delete_reference(env, reference);
    }
    if callback.is_null() {
        return;
    }
    // SAFETY: the live environment on its JavaScript thread.
    unsafe {
        let Ok(arg) = String::to_napi_value(env, reason.to_owned()) else {
            return;
        };
        let mut undefined = ptr::null_mut();
        sys::napi_get_undefined(env, &mut undefined);
        let mut ignored = ptr::null_mut();
        sys::napi_call_function(env, undefined, callback, 1, &arg, &mut ignored);
    }
}

/// The threadsafe function's call: runs every queued job on the JavaScript thread.
unsafe extern "C" fn drain(env: sys::napi_env, _: sys::napi_value, context: *mut c_void, _: *mut c_void) {
    if env.is_null() || context.is_null() {
        return; // the environment is going away
    }
    // SAFETY: `context` is the inbox kept alive by the threadsafe function.
    let inbox = unsafe { &*(context as *const Inbox) };
    let jobs = {
        let mut state = inbox.lock();
        state.scheduled = false;
        std::mem::take(&mut state.jobs)
    };
    let Ok(env_state) = state(env) else { return };
    let mut settled = false;
    for job in jobs {
        let mut scope = ptr::null_mut();
        // SAFETY: on the JavaScript thread of `env`; scopes are closed in order.
        unsafe { sys::napi_open_handle_scope(env, &mut scope) };
        (job.run)(env);
        if job.settles {
            env_state.end();
            settled = true;
        }
        // A throwing callback must not take the others (or the process) down:
        // report it as Node reports a throwing event listener.
        report_pending_exception(env);
        // SAFETY: as above.
        unsafe { sys::napi_close_handle_scope(env, scope) };
    }
    if settled {
        let mut scope = ptr::null_mut();
        // SAFETY: as above.
        unsafe { sys::napi_open_handle_scope(env, &mut scope) };
        env_state.keep_polling();
        // SAFETY: as above.
        unsafe { sys::napi_close_handle_scope(env, scope) };
    }
}

/// Reports (never rethrows) an exception left pending by JavaScript code the addon called.
fn report_pending_exception(env: sys::napi_env) {
    let mut pending = false;
    // SAFETY: on the JavaScript thread of `env`.
    unsafe {
        sys::napi_is_exception_pending(env, &mut pending);
        if pending {
            let mut error = ptr::null_mut();
            sys::napi_get_and_clear_last_exception(env, &mut error);
            errors::report_uncaught(env, error);
        }
    }
}

/// Frees the inbox reference held by the threadsafe function.
unsafe extern "C" fn finalize_inbox(_: sys::napi_env, data: *mut c_void, _: *mut c_void) {
    if !data.is_null() {
        // SAFETY: the strong reference made for the function in `EnvState::new`.
        drop(unsafe { Arc::from_raw(data as *const Inbox) });
    }
}

/// The environment is being torn down (process exit or worker termination):
/// stop accepting jobs and release the threadsafe function before Node frees it.
unsafe extern "C" fn on_teardown(data: *mut c_void) {
    // SAFETY: the strong reference made for this hook in `EnvState::new`.
    let inbox = unsafe { Arc::from_raw(data as *const Inbox) };
    let tsfn = {
        let mut state = inbox.lock();
        state.jobs.clear();
        state.tsfn.take()
    };
    if let Some(tsfn) = tsfn {
        // SAFETY: released once (taken out of the inbox under its lock).
        unsafe { sys::napi_release_threadsafe_function(tsfn.0, sys::ThreadsafeFunctionReleaseMode::abort) };
    }
    // The thread's state refers to the dying environment; forget it without
    // touching napi (references die with the environment).
    let env = STATE
        .try_with(|s| {
            s.try_borrow()
                .ok()
                .and_then(|s| s.as_ref().map(|state| state.env))
        })
        .ok()
        .flatten();
    if let Some(env) = env {
        let _ = TORN_DOWN.try_with(|t| t.set(env));
    }
    let _ = STATE.try_with(|s| {
        if let Ok(mut slot) = s.try_borrow_mut() {
            std::mem::forget(slot.take());
        }
    });
}

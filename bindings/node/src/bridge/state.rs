//! What each Node environment keeps on its JavaScript thread: its inbox and
//! threadsafe function, the count of pending operations that references it,
//! the keep-polling hook, the drain that runs queued jobs, and the teardown
//! that forgets it all.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr;
use std::rc::Rc;
use std::sync::Arc;

use napi::{Status, sys};

use super::inbox::{Inbox, Sender, Tsfn};
use super::outbox::Outbox;
use crate::errors::{self, check};

/// What one Node environment (the main thread or a worker) keeps on its
/// JavaScript thread.
pub(crate) struct EnvState {
    pub(super) env: sys::napi_env,
    tsfn: Tsfn,
    pub(super) sender: Sender,
    pub(super) runtime: tokio::runtime::Handle,
    pub(super) outbox: Arc<Outbox>,
    /// Operations whose promise is not settled yet.
    pending: Cell<usize>,
    /// `() => void`: called after settling promises, so the event loop keeps
    /// polling while replies are still due.
    keep_polling: Cell<sys::napi_ref>,
    /// Lost-lock callbacks by watcher id (strong references).
    pub(super) callbacks: RefCell<HashMap<u64, sys::napi_ref>>,
    pub(super) next_id: Cell<u64>,
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

impl EnvState {
    fn new(env: sys::napi_env) -> napi::Result<EnvState> {
        let runtime = fencelock::runtime_handle()
            .map_err(|e| napi::Error::new(Status::GenericFailure, e.to_string()))?;
        let (inbox, tsfn) = Inbox::open(env, Some(drain))?;
        // Idle until an operation is pending: never keeps the loop alive by itself.
        // SAFETY: on the JavaScript thread of `env`, which owns the function.
        check(
            unsafe { sys::napi_unref_threadsafe_function(env, tsfn.0) },
            "unref",
        )?;
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
            outbox: Arc::new(Outbox::new()),
            pending: Cell::new(0),
            keep_polling: Cell::new(ptr::null_mut()),
            callbacks: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
        })
    }

    /// Installs the JavaScript hooks: the error factory and the reporter of
    /// exceptions thrown by callbacks go to [`errors`], which keeps them; the
    /// keep-polling hook stays here.
    pub(crate) fn set_hooks(
        &self,
        factory: sys::napi_value,
        reporter: sys::napi_value,
        keep_polling: sys::napi_value,
    ) -> napi::Result<()> {
        errors::install(self.env, factory, reporter)?;
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

    /// One more pending operation.
    pub(super) fn begin(&self) {
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
}

/// The threadsafe function's call: runs every queued job on the JavaScript thread.
unsafe extern "C" fn drain(env: sys::napi_env, _: sys::napi_value, context: *mut c_void, _: *mut c_void) {
    if env.is_null() || context.is_null() {
        return; // the environment is going away
    }
    // SAFETY: `context` is the inbox kept alive by the threadsafe function.
    let inbox = unsafe { &*(context as *const Inbox) };
    let jobs = inbox.take();
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

/// The environment is being torn down (process exit or worker termination):
/// stop accepting jobs and release the threadsafe function before Node frees it.
unsafe extern "C" fn on_teardown(data: *mut c_void) {
    // SAFETY: the strong reference made for this hook in `EnvState::new`.
    let inbox = unsafe { Arc::from_raw(data as *const Inbox) };
    inbox.close();
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

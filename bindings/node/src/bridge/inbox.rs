//! The inbox: jobs that runtime tasks queue for the JavaScript thread, and
//! the threadsafe function that wakes it to run them.

use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};

use napi::sys;

use crate::errors::check;

/// Work to run on the JavaScript thread, given its environment.
pub(super) type Run = Box<dyn FnOnce(sys::napi_env) + Send>;

/// One queued piece of work.
pub(super) struct Job {
    pub(super) run: Run,
    /// Whether it settles a pending operation (which keeps the loop alive).
    pub(super) settles: bool,
}

/// A raw threadsafe function; calling one from any thread is its purpose.
#[derive(Clone, Copy)]
pub(super) struct Tsfn(pub(super) sys::napi_threadsafe_function);

// SAFETY: napi documents threadsafe functions as callable from any thread;
// the pointer is only used through the napi calls made for that.
unsafe impl Send for Tsfn {}

/// The queue a runtime task writes to and the JavaScript thread drains.
pub(super) struct Inbox {
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
    /// A new inbox of `env` and its threadsafe function, whose calls run
    /// `drain` on the JavaScript thread with the inbox as context.
    pub(super) fn open(
        env: sys::napi_env,
        drain: sys::napi_threadsafe_function_call_js,
    ) -> napi::Result<(Arc<Inbox>, Tsfn)> {
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
                drain,
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
        Ok((inbox, tsfn))
    }

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

    /// Takes every queued job (the drain, on the JavaScript thread); the
    /// next push schedules a new wake-up.
    pub(super) fn take(&self) -> Vec<Job> {
        let mut state = self.lock();
        state.scheduled = false;
        std::mem::take(&mut state.jobs)
    }

    /// The environment is being torn down: stops accepting jobs and releases
    /// the threadsafe function before Node frees it.
    pub(super) fn close(&self) {
        let tsfn = {
            let mut state = self.lock();
            state.jobs.clear();
            state.tsfn.take()
        };
        if let Some(tsfn) = tsfn {
            // SAFETY: released once (taken out of the inbox under its lock).
            unsafe {
                sys::napi_release_threadsafe_function(tsfn.0, sys::ThreadsafeFunctionReleaseMode::abort)
            };
        }
    }
}

/// The sending side of an environment's inbox, for runtime tasks.
#[derive(Clone)]
pub(super) struct Sender(pub(super) Arc<Inbox>);

impl Sender {
    pub(super) fn send(&self, run: Run, settles: bool) {
        self.0.push(Job { run, settles });
    }
}

/// Frees the inbox reference held by the threadsafe function.
unsafe extern "C" fn finalize_inbox(_: sys::napi_env, data: *mut c_void, _: *mut c_void) {
    if !data.is_null() {
        // SAFETY: the strong reference made for the function in `Inbox::open`.
        drop(unsafe { Arc::from_raw(data as *const Inbox) });
    }
}

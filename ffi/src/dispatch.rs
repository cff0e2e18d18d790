//! The callback thread: every call fencelock makes into C code (event
//! callbacks and `*_async` completions) runs on one thread of its own,
//! `fencelock-cb`, never on the runtime's I/O thread.
//!
//! Why a thread apart from the runtime: the runtime has one worker (see
//! `core/src/runtime.rs`), so a callback that ran there stopped every
//! renewal of the process for as long as it ran, and a slow one lost locks.
//! Here a callback that blocks delays only the callbacks queued behind it.
//! The runtime only ever queues work for this thread and never waits for it.
//!
//! Why one thread per process rather than one per client:
//! * Callbacks keep one order, the order their causes happened in (an
//!   acquire's completion comes before the loss event of that lock).
//! * Nothing else of ours runs while a callback runs, so the waits that
//!   guarantee "no callback runs after this returns" (see `events.rs`) have
//!   nothing to wait for when called from a callback, and two callbacks of
//!   different clients can never wait for each other's thread.
//! * One idle thread per process, started on first use, whatever the number
//!   of clients.
//!
//! The price: a slow callback of one client delays the callbacks of the
//! others (never their I/O or renewals).

use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::boundary::{Failure, FfiResult};
use crate::status::fencelock_status;

/// Work for the callback thread: a call of C code and what surrounds it.
type Job = Box<dyn FnOnce() + Send>;

/// The queue of the callback thread.
pub(crate) struct Dispatcher {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
}

/// This process's dispatcher, by process id. After `fork()` the child has
/// none of the parent's threads, so its first callback starts its own.
static DISPATCHER: Mutex<Option<(u32, Arc<Dispatcher>)>> = Mutex::new(None);

thread_local! {
    /// True on the callback thread, i.e. inside a callback.
    static ON_CALLBACK_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread is the callback thread: the caller is inside
/// a fencelock callback, and no other callback can be running.
pub(crate) fn on_callback_thread() -> bool {
    ON_CALLBACK_THREAD.get()
}

/// A call of a replaceable C callback in progress: what a caller replacing
/// or clearing that callback (or freeing its object) waits for, so the old
/// `user_data` may be freed as soon as it returns.
#[derive(Clone, Copy)]
pub(crate) struct Call {
    /// The generation of the callback being called.
    generation: u64,
    /// The process making it. A child forked during a call has no callback
    /// thread: that call never ends there, and must not be waited for.
    pid: u32,
}

impl Call {
    /// A call, starting now, of the callback set at `generation`.
    pub(crate) fn of(generation: u64) -> Call {
        Call {
            generation,
            pid: std::process::id(),
        }
    }
}

/// Waits on `idle` until `calling(state)` is no call of a callback replaced
/// before `generation` (callbacks are numbered as they are set). Returns at
/// once on the callback thread: calls run one at a time there, so the only
/// one in progress is the caller's own, which ends when the caller returns.
/// Whoever ends a call must notify `idle`.
pub(crate) fn wait_for_replaced_calls<S>(
    mut state: MutexGuard<'_, S>,
    idle: &Condvar,
    generation: u64,
    calling: impl Fn(&S) -> Option<Call>,
) {
    if on_callback_thread() {
        return;
    }
    let pid = std::process::id();
    while calling(&state).is_some_and(|call| call.generation < generation && call.pid == pid) {
        state = idle.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A queue and an option: a panic elsewhere cannot leave them half-written.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Dispatcher {
    /// This process's dispatcher; starts its thread on first use.
    ///
    /// Operations get it before they start, so a thread that cannot be
    /// started fails the call instead of losing a callback.
    pub(crate) fn get() -> FfiResult<Arc<Dispatcher>> {
        let pid = std::process::id();
        let mut slot = lock(&DISPATCHER);
        if let Some((owner, dispatcher)) = slot.as_ref()
            && *owner == pid
        {
            return Ok(dispatcher.clone());
        }
        let dispatcher = Arc::new(Dispatcher {
            jobs: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
        });
        let worker = dispatcher.clone();
        // Never joined: like the runtime, the thread lives as long as the process.
        std::thread::Builder::new()
            .name("fencelock-cb".to_owned())
            .spawn(move || worker.run())
            .map_err(|e| {
                Failure::new(
                    fencelock_status::FENCELOCK_STATUS_CLOSED,
                    format!("cannot start fencelock's callback thread: {e}"),
                )
            })?;
        *slot = Some((pid, dispatcher.clone()));
        Ok(dispatcher)
    }

    /// Queues `job` behind every job queued before it. Never blocks (beyond
    /// a short lock), so the runtime may call it.
    pub(crate) fn submit(&self, job: impl FnOnce() + Send + 'static) {
        lock(&self.jobs).push_back(Box::new(job));
        self.ready.notify_one();
    }

    fn run(&self) {
        ON_CALLBACK_THREAD.set(true);
        loop {
            let job = self.next_job();
            // The thread must survive a bug in our part of a job: every later
            // callback of the process depends on it. (C code cannot unwind into
            // Rust: an `extern "C"` function that tries aborts the process.)
            if catch_unwind(AssertUnwindSafe(job)).is_err() {
                tracing::error!("internal error in a fencelock callback job (a bug, please report it)");
            }
        }
    }

    fn next_job(&self) -> Job {
        let mut jobs = lock(&self.jobs);
        loop {
            if let Some(job) = jobs.pop_front() {
                return job;
            }
            jobs = self
                .ready
                .wait(jobs)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn jobs_run_in_order_on_the_callback_thread() {
        let dispatcher = Dispatcher::get().unwrap();
        let (tx, rx) = mpsc::channel();
        for i in 0..100 {
            let tx = tx.clone();
            dispatcher.submit(move || tx.send((i, on_callback_thread())).unwrap());
        }
        let seen: Vec<_> = (0..100)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        assert_eq!(seen, (0..100).map(|i| (i, true)).collect::<Vec<_>>());
        assert!(!on_callback_thread());
    }

    #[test]
    fn a_panicking_job_does_not_stop_later_ones() {
        let dispatcher = Dispatcher::get().unwrap();
        let (tx, rx) = mpsc::channel();
        dispatcher.submit(|| panic!("a bug in a job"));
        dispatcher.submit(move || tx.send(()).unwrap());
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
    }

    #[test]
    fn one_dispatcher_per_process() {
        assert!(Arc::ptr_eq(
            &Dispatcher::get().unwrap(),
            &Dispatcher::get().unwrap()
        ));
    }
}

/// The caller's `user_data`, carried to the callback thread.
#[derive(Clone, Copy)]
pub(crate) struct UserData(pub(crate) *mut c_void);

// SAFETY: the header requires `user_data` to be usable from any thread; we
// never dereference it, only hand it back.
unsafe impl Send for UserData {}
// SAFETY: as above.
unsafe impl Sync for UserData {}

impl UserData {
    /// The pointer. A method, so closures capture the `Send` wrapper rather
    /// than the raw field.
    pub(crate) fn get(self) -> *mut c_void {
        self.0
    }
}

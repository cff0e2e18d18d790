//! Promises and lost-lock callbacks settled from fencelock's runtime: the
//! addon's own async bridge between the core's tokio runtime and Node.
//!
//! # What it does
//!
//! Every operation runs on the core's one internal tokio runtime
//! ([`fencelock::runtime_handle`]); nothing here starts a second one.
//!
//! - Out ([`outbox`]): operations submitted from the JavaScript thread are
//!   handed to the runtime in bursts. The first submission of a burst (every
//!   promise that one drain's callbacks start) spawns one task, and that task
//!   drives the whole burst.
//! - Back ([`inbox`]): a finished operation ([`promise`]) or a fired
//!   lost-lock watcher ([`watch`]) hands a job to its Node environment's
//!   inbox, and one threadsafe function per environment wakes the JavaScript
//!   thread, which runs every queued job in one go.
//! - Per environment ([`state`](mod@state)): the main thread and each worker have their
//!   own inbox, threadsafe function, count of pending operations and watcher
//!   callbacks, forgotten when the environment is torn down.
//!
//! The threadsafe function keeps the event loop alive only while a promise is
//! pending: it is referenced when the count of pending operations goes from
//! 0 to 1 and unreferenced when it returns to 0. Lost-lock watchers are not
//! counted, so a process whose only remaining business is a held lock (or a
//! closed client) exits by itself.
//!
//! # Why
//!
//! Waking the JavaScript thread is expensive, so it is woken once for a whole
//! batch of settlements, not once per promise. The other way round, driving a
//! burst in one task rather than spawning a task per operation is what lets
//! its requests leave together: each operation runs up to its first reply
//! before the connection's writer task gets the thread, so the writer finds
//! them all queued and sends them in one system call. With a task each, tokio
//! runs the writer right after every single operation and each request costs
//! its own `writev`. The measurements are in `docs/performance.md` ("Node: one
//! task drives a burst of operations").
//!
//! # The stock path it replaces
//!
//! napi-rs's own future-to-promise path: an `#[napi] async fn`, or
//! `Env::spawn_future` (both `napi::tokio_runtime::execute_tokio_future`,
//! behind napi's `async`/`tokio_rt` feature, which this crate does not
//! enable). That path spawns every future as its own task on napi-rs's own
//! tokio runtime (a second runtime beside the core's) and settles every
//! promise through a threadsafe function of its own (`JsDeferred`): one task,
//! one threadsafe function and one wake-up of the JavaScript thread per
//! promise. Lost-lock callbacks would likewise each need a
//! `ThreadsafeFunction`; here they ride the same inbox.

mod inbox;
mod outbox;
mod promise;
mod state;
mod watch;

pub(crate) use state::state;

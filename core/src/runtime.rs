//! The one internal tokio runtime every front shares.
//!
//! All Redis I/O, timers and watchdog tasks run here, whatever executor (or
//! none) the caller uses. The runtime is leaked on purpose: dropping a runtime
//! from inside async code panics, and fronts (Python, Node, C) have no safe
//! moment to drop it.
//!
//! tokio does not survive `fork()`: the child has the parent's memory but
//! none of its threads. A child therefore gets a runtime of its own on first
//! use, and objects made by the parent refuse to work in the child with
//! [`ErrorKind::Closed`] instead of hanging.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

use crate::error::{Error, ErrorKind, Result};

/// The runtime of the current process, by process id.
static RUNTIME: Mutex<Option<(u32, Handle)>> = Mutex::new(None);

/// The environment variable that sets the internal runtime's worker
/// threads, read once when the runtime starts (in a forked child: again).
pub const WORKER_THREADS_ENV: &str = "FENCELOCK_WORKER_THREADS";

/// Worker threads of the internal runtime unless [`WORKER_THREADS_ENV`]
/// says otherwise: one.
///
/// Lock traffic is I/O bound, and a second worker mostly adds wake-ups
/// (tokio wakes an idle worker to steal whenever a task is queued): one
/// worker used less CPU per lock cycle and matched or beat two workers'
/// throughput from Node and from Python (docs/performance.md). It also
/// means that work on a runtime thread holds up every operation and renewal
/// of the process, which is why C and .NET callbacks run on a thread of
/// their own.
pub const DEFAULT_WORKER_THREADS: usize = 1;

/// The most worker threads [`WORKER_THREADS_ENV`] may ask for.
pub const MAX_WORKER_THREADS: usize = 64;

/// The handle of this process's internal runtime, created on first use.
///
/// For language bindings that must schedule their own glue futures (a
/// Python awaitable, a Node promise, a C callback) on the runtime that owns
/// fencelock's connections, instead of starting a second runtime. After
/// `fork()` the child gets a fresh runtime from this call.
///
/// # Errors
/// [`ErrorKind::Config`] when [`WORKER_THREADS_ENV`] is not a valid count;
/// [`ErrorKind::Closed`] when the runtime's threads cannot be started.
pub fn handle() -> Result<Handle> {
    let pid = current_pid();
    let mut slot = RUNTIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((owner, handle)) = slot.as_ref()
        && *owner == pid
    {
        return Ok(handle.clone());
    }
    let runtime = build()?;
    let handle = runtime.handle().clone();
    // Never dropped: see the module docs.
    std::mem::forget(runtime);
    *slot = Some((pid, handle.clone()));
    Ok(handle)
}

fn build() -> Result<Runtime> {
    install_crypto_provider();
    let workers = worker_threads(std::env::var_os(WORKER_THREADS_ENV))?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("fencelock-rt")
        .enable_all()
        .build()
        .map_err(|e| {
            Error::new(
                ErrorKind::Closed,
                format!("cannot start fencelock's runtime: {e}"),
            )
        })
}

/// The worker count [`WORKER_THREADS_ENV`] asks for (unset or empty: the
/// default); anything but a whole number from 1 to [`MAX_WORKER_THREADS`]
/// is a [`ErrorKind::Config`] error, reported by every operation.
fn worker_threads(setting: Option<std::ffi::OsString>) -> Result<usize> {
    let Some(setting) = setting.filter(|s| !s.is_empty()) else {
        return Ok(DEFAULT_WORKER_THREADS);
    };
    setting
        .to_str()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|n| (1..=MAX_WORKER_THREADS).contains(n))
        .ok_or_else(|| {
            Error::config(format!(
                "{WORKER_THREADS_ENV} must be a whole number from 1 to {MAX_WORKER_THREADS}, got {setting:?}; \
                 unset it for the default ({DEFAULT_WORKER_THREADS})"
            ))
        })
}

/// rustls needs one process-wide crypto provider; redis-rs does not pick one.
fn install_crypto_provider() {
    // Err means another part of the process installed one already: fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// This process's id, or 0 when not known yet (or a fork since cleared it).
static PID: AtomicU32 = AtomicU32::new(0);

/// The process id objects remember at creation, to detect use after `fork()`.
///
/// Checked on every lock operation, so it is cached: `getpid()` is a system
/// call, and a handler registered with `pthread_atfork` clears the cache in
/// a forked child. (A child made by a raw `clone` system call, bypassing the
/// C library's `fork()`, is not noticed.)
pub(crate) fn current_pid() -> u32 {
    let cached = PID.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    let pid = std::process::id();
    if fork_clears_cache() {
        PID.store(pid, Ordering::Relaxed);
    }
    pid
}

/// Registers, once, the `pthread_atfork` handler that clears [`PID`] in a
/// child; `false` if that failed (then nothing is cached).
#[cfg(unix)]
fn fork_clears_cache() -> bool {
    extern "C" fn forget_pid() {
        // Async-signal-safe: one atomic store, in the child only.
        PID.store(0, Ordering::Relaxed);
    }
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    // SAFETY: the handler only stores to an atomic; glibc unregisters the
    // handlers of a shared object (a Python or Node extension) when it is unloaded.
    *REGISTERED.get_or_init(|| unsafe { libc::pthread_atfork(None, None, Some(forget_pid)) } == 0)
}

/// No `fork()` here: the id never changes.
#[cfg(not(unix))]
fn fork_clears_cache() -> bool {
    true
}

/// Fails when an object made in process `owner` is used in a forked child.
pub(crate) fn ensure_same_process(owner: u32, what: &str) -> Result<()> {
    if owner == current_pid() {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::Closed,
            format!(
                "this {what} was created in process {owner} and cannot be used after fork(); \
                 create a new client in the child process (e.g. in a post-fork hook)"
            ),
        ))
    }
}

/// Runs an operation for a caller on any executor.
///
/// Inside a tokio runtime (the common case) the future is simply awaited
/// there: no hop between runtimes. The caller's runtime must then have time
/// enabled (`#[tokio::main]` does), as with redis-rs. Elsewhere (another
/// executor, or none) it runs on the internal runtime. Connections and the
/// watchdog always live on the internal runtime, whoever calls.
pub(crate) async fn run<F>(future: F) -> Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if Handle::try_current().is_ok() {
        return Ok(future.await);
    }
    on_runtime(future).await
}

/// Runs `future` on the internal runtime and awaits it from any executor
/// (a front's own threads, another async runtime).
///
/// Dropping the returned future aborts the task; the task is then dropped
/// on the internal runtime a moment later, which starts the undo of what it
/// had begun (an acquire leaves its queue, a grant nobody read is
/// released). [`crate::Client::settle`] and [`crate::settle`] wait for that
/// teardown too. A task that panics ends with [`ErrorKind::Internal`]; one
/// cut short by the runtime shutting down, with [`ErrorKind::Closed`].
pub async fn on_runtime<F>(future: F) -> Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let task = AbortOnDrop(Some(handle()?.spawn(future)));
    task.join().await
}

/// Aborts its task when dropped before the task ended.
struct AbortOnDrop<T: Send + 'static>(Option<JoinHandle<T>>);

impl<T: Send + 'static> AbortOnDrop<T> {
    async fn join(mut self) -> Result<T> {
        let task = self.0.as_mut().expect("joined once");
        let output = task.await.map_err(|e| {
            if e.is_panic() {
                Error::panicked("an internal fencelock task")
            } else {
                // Aborted by nobody but the runtime shutting down.
                Error::new(
                    ErrorKind::Closed,
                    "fencelock's runtime shut down during the operation",
                )
            }
        });
        self.0 = None;
        output
    }
}

impl<T: Send + 'static> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        let Some(task) = self.0.take() else { return };
        task.abort();
        // The abort takes effect when the runtime next gets to the task: a
        // settle from now on waits until it has (and so until the task's
        // own clean-up is counted).
        let teardown = crate::background::abandoned();
        if let Ok(runtime) = handle() {
            runtime.spawn(async move {
                // A finished task's output (say, a grant) is dropped here.
                let _ = task.await;
                drop(teardown);
            });
        }
    }
}

/// Runs `future` to completion from a thread with no async runtime.
///
/// Returns [`ErrorKind::WouldBlock`] when called from inside any tokio
/// runtime (including fencelock's own threads, e.g. from a callback), where
/// blocking would stall or deadlock it.
pub fn block_on<F>(future: F) -> Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if Handle::try_current().is_ok() {
        return Err(Error::new(
            ErrorKind::WouldBlock,
            "a blocking fencelock call was made from inside an async runtime (or a fencelock callback); \
             use the async API there, or call from a plain thread",
        ));
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let task = handle()?.spawn(async move {
        let _ = tx.send(future.await);
    });
    rx.recv().map_err(|_| {
        if task.is_finished() {
            Error::panicked("the fencelock task")
        } else {
            Error::new(
                ErrorKind::Closed,
                "the fencelock task was dropped before finishing",
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_setting_is_a_small_whole_number_or_the_default() {
        let read = |s: Option<&str>| worker_threads(s.map(Into::into));
        assert_eq!(read(None).unwrap(), DEFAULT_WORKER_THREADS);
        assert_eq!(read(Some("")).unwrap(), DEFAULT_WORKER_THREADS);
        assert_eq!(read(Some("2")).unwrap(), 2);
        assert_eq!(read(Some(" 4 ")).unwrap(), 4);
        for bad in ["0", "65", "-1", "two", "1.5"] {
            let err = read(Some(bad)).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Config, "{bad}");
            assert!(err.message().contains(WORKER_THREADS_ENV), "{err}");
        }
    }
}

//! Clean-up that runs after its caller has its answer: the undo of an
//! abandoned acquire attempt, the part of a release still on its way to
//! slower nodes, a lock granted to a caller who had stopped waiting. A
//! process about to exit waits for it ([`crate::Client::settle`],
//! [`crate::settle`]); otherwise it dies with the process, and a key it
//! would have removed blocks its resource until the ttl.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use tokio::sync::Notify;

/// Counts clean-ups still running.
#[derive(Debug, Default)]
pub(crate) struct Background {
    running: AtomicUsize,
    idle: Notify,
}

/// Every client's clean-ups together, for [`crate::settle`].
static EVERY_CLIENT: LazyLock<Arc<Background>> = LazyLock::new(Arc::default);

/// Tasks on the internal runtime whose caller stopped waiting, until the
/// runtime has dropped them (which starts their clean-up, counted by their
/// client). Which client a task served is not known here, so every
/// client's settle waits for them all: a teardown takes a moment.
static ABANDONED: LazyLock<Arc<Background>> = LazyLock::new(Arc::default);

/// Counts an abandoned task until the returned guard is dropped, once the
/// task is gone.
pub(crate) fn abandoned() -> Running {
    ABANDONED.start()
}

/// Resolves once every abandoned task is gone, and so its clean-up, if
/// any, is counted by its client.
pub(crate) async fn abandoned_gone() {
    ABANDONED.idle().await;
}

/// One running clean-up: held by its task, so the counts fall when the task
/// ends, is aborted, or is dropped with its runtime.
#[derive(Debug)]
pub(crate) struct Running {
    client: Arc<Background>,
}

impl Background {
    /// Counts a clean-up from now on (in this client's count and the
    /// process's): call it before spawning the task, so a `settle` right
    /// after sees it.
    pub(crate) fn start(self: &Arc<Self>) -> Running {
        self.enter();
        EVERY_CLIENT.enter();
        Running { client: self.clone() }
    }

    fn enter(&self) {
        self.running.fetch_add(1, Ordering::AcqRel);
    }

    fn leave(&self) {
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }

    /// Resolves when no clean-up is running.
    pub(crate) async fn idle(&self) {
        loop {
            // Register before looking, so an end between the two is not missed.
            let ended = self.idle.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.running.load(Ordering::Acquire) == 0 {
                return;
            }
            ended.await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.client.leave();
        EVERY_CLIENT.leave();
    }
}

/// Resolves once no client of this process has clean-up running in the
/// background (see [`crate::Client::settle`]): for a process about to exit,
/// under a time limit of its own. Fronts call it at exit (Python's
/// `atexit`); each clean-up is bounded by its client's connect and per-node
/// timeouts.
pub async fn settle() {
    EVERY_CLIENT.idle().await;
}

/// Whether no client of this process has clean-up running in the
/// background right now (a cheap check before waiting in [`settle`]).
pub fn is_settled() -> bool {
    EVERY_CLIENT.running.load(Ordering::Acquire) == 0
}

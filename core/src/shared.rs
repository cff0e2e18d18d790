//! What a [`Client`](crate::Client) and the locks it hands out share.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::backoff::RetryPolicy;
use crate::error::{Error, ErrorKind, Result};
use crate::linger::Lingers;
use crate::metrics::ClientMetrics;
use crate::node_set::NodeSet;
use crate::options::LockDefaults;
use crate::runtime;
use crate::startup::Startup;
use crate::wake::Wakeups;
use crate::watchdog::Watchdog;

/// A client's nodes, settings and background machinery.
pub(crate) struct ClientShared {
    pub(crate) nodes: Arc<NodeSet>,
    pub(crate) key_prefix: String,
    pub(crate) retry: RetryPolicy,
    pub(crate) defaults: LockDefaults,
    pub(crate) watchdog: Watchdog,
    /// How long background clean-up may wait for a node's connection.
    pub(crate) connect_timeout: Duration,
    pub(crate) startup: Startup,
    /// Push wake-ups for this client's waiters.
    pub(crate) wakeups: Wakeups,
    /// Releases of contended locks this client may take again at once.
    pub(crate) lingers: Arc<Lingers>,
    /// What it counts ([`crate::Client::metrics`]).
    pub(crate) metrics: Arc<ClientMetrics>,
    pid: u32,
    closed: AtomicBool,
    /// Raised by [`ClientShared::close`], for the work that lasts until then
    /// (observations of elections).
    closing: CancellationToken,
}

impl ClientShared {
    pub(crate) fn new(
        nodes: Arc<NodeSet>,
        key_prefix: String,
        retry: RetryPolicy,
        defaults: LockDefaults,
        connect_timeout: Duration,
        metrics: ClientMetrics,
    ) -> Result<Self> {
        let runtime = runtime::handle()?;
        // The first connections are made where the caller runs, if on a
        // tokio runtime: a Rust caller's requests and their connection's I/O
        // then share a runtime, with no cross-thread wake-up per request
        // (docs/performance.md, "Where connections live").
        let home = tokio::runtime::Handle::try_current().unwrap_or_else(|_| runtime.clone());
        let closing = CancellationToken::new();
        Ok(ClientShared {
            lingers: Lingers::new(closing.clone()),
            watchdog: Watchdog::start(nodes.clone(), &runtime),
            startup: Startup::spawn(nodes.clone(), &home),
            wakeups: Wakeups::new(nodes.clone(), &key_prefix)?,
            metrics: Arc::new(metrics),
            nodes,
            key_prefix,
            retry,
            defaults,
            connect_timeout,
            pid: runtime::current_pid(),
            closed: AtomicBool::new(false),
            closing,
        })
    }

    /// Fails in a forked child: the parent's connections and tasks are not there.
    pub(crate) fn ensure_usable(&self) -> Result<()> {
        runtime::ensure_same_process(self.pid, "fencelock client")
    }

    /// Fails when the client is closed or unusable; otherwise waits for its
    /// first connection and fails with what a node refused then.
    pub(crate) async fn ready(&self) -> Result<()> {
        self.ensure_open()?;
        self.startup.finished().await
    }

    /// Fails when the client is closed or unusable, without waiting.
    pub(crate) fn ensure_open(&self) -> Result<()> {
        self.ensure_usable()?;
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::new(
                ErrorKind::Closed,
                "the client is closed; build a new one",
            ));
        }
        Ok(())
    }

    /// Refuses new operations from now on, and ends the work that lasts
    /// until then.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.closing.cancel();
    }

    /// Resolves once the client is closed.
    pub(crate) async fn closed(&self) {
        self.closing.cancelled().await;
    }
}

//! The client: made from a [`ClientBuilder`], and the operations that start from it.

use std::fmt;
use std::sync::Arc;

use crate::acquire;
use crate::claim::Claim;
use crate::config::ClientBuilder;
use crate::error::{Error, ErrorKind, Result};
use crate::fenced::{Fence, fenced_set_outcome};
use crate::keys::LockKeys;
use crate::lock::Lock;
use crate::metrics::ClientMetrics;
use crate::node::Node;
use crate::node_set::NodeSet;
use crate::options::LockOptions;
use crate::runtime;
use crate::scripts;
use crate::shared::ClientShared;

/// A connection to one Redis node (single-node locks) or to N independent
/// masters (Redlock). Cheap to clone; clones share connections.
///
/// ```no_run
/// # async fn demo() -> fencelock::Result<()> {
/// use std::time::Duration;
/// use fencelock::{Client, LockOptions};
///
/// let client = Client::builder().node("redis://127.0.0.1:6379").build().await?;
/// let lock = client.acquire("reports:nightly", LockOptions::new(Duration::from_secs(30))).await?;
/// println!("fencing token {}", lock.fencing_token());
/// lock.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    shared: Arc<ClientShared>,
}

impl ClientBuilder {
    /// Validates the configuration, connects to the nodes, and returns the client.
    ///
    /// Unreachable nodes do not fail the build (a quorum may still be
    /// reachable; they are retried on use). Bad configuration, refused
    /// credentials and TLS failures do.
    pub async fn build(self) -> Result<Client> {
        let client = self.start()?;
        client.shared.startup.finished().await?;
        Ok(client)
    }

    /// Validates the configuration and returns the client at once, connecting
    /// to the nodes in the background: for constructors that must not wait
    /// (a JavaScript `new Client(…)`) but should still reject bad
    /// configuration on the spot.
    ///
    /// Errors: [`ErrorKind::Config`] for bad configuration (and
    /// [`ErrorKind::Tls`] for unreadable TLS material), at once. A node that
    /// refuses the credentials or the TLS handshake fails the client's
    /// operations with that error instead, as [`ClientBuilder::build`] would
    /// have failed.
    pub fn start(self) -> Result<Client> {
        let config = self.validate()?;
        let nodes = config
            .endpoints
            .into_iter()
            .map(|endpoint| Node::new(endpoint, &config.settings))
            .collect::<Result<Vec<_>>>()?;
        let shared = ClientShared::new(
            Arc::new(NodeSet::new(nodes, config.drift_factor)),
            config.key_prefix,
            config.retry,
            config.defaults,
            config.settings.connect_timeout,
            ClientMetrics::new(config.metrics_per_resource),
        )?;
        Ok(Client {
            shared: Arc::new(shared),
        })
    }
}

impl Client {
    /// What every operation of this client shares.
    pub(crate) fn shared(&self) -> &Arc<ClientShared> {
        &self.shared
    }

    /// Starts configuring a client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Checks a request the way [`Client::acquire`] would, without any I/O:
    /// for bindings that start acquisitions in the background but must report
    /// a bad resource or duration to the caller at once.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] for an empty, oversized or
    /// malformed resource, or a ttl or wait out of range.
    pub fn check_request(&self, resource: &str, options: &LockOptions) -> Result<()> {
        LockKeys::new(&self.shared.key_prefix, resource)?;
        options.resolve(&self.shared.defaults).map(|_| ())
    }

    /// Takes the lock on `resource`, retrying with backoff while it is held
    /// elsewhere, for up to the options' `wait`.
    ///
    /// Errors: [`ErrorKind::Timeout`] when `wait` passed (or
    /// [`ErrorKind::NotAcquired`] when `wait` is zero), [`ErrorKind::Unavailable`]
    /// when a majority cannot be reached, [`ErrorKind::InvalidArgument`] for a
    /// bad resource or ttl. Dropping the future cancels the attempt and undoes
    /// any partial grant.
    pub async fn acquire(&self, resource: &str, options: LockOptions) -> Result<Lock> {
        let claim = LockKeys::new(&self.shared.key_prefix, resource).map(Claim::Lock);
        acquire::claim(&self.shared, claim, options).await
    }

    /// One attempt: `Ok(None)` when the lock is held by someone else.
    pub async fn try_acquire(&self, resource: &str, options: LockOptions) -> Result<Option<Lock>> {
        acquire::none_if_refused(
            self.acquire(resource, options.wait(std::time::Duration::ZERO))
                .await,
        )
    }

    /// Writes `value` to the Redis hash `key` (fields `value`, `fence` and
    /// `holder`) on the first node, only if `fence` is newer than the last
    /// write there: a larger token, or the same token from the same grant.
    /// Pass [`Lock::fence`]; a bare token (`u64`) writes only where every
    /// stored token is older. A holder that lost its lock and writes late
    /// gets [`ErrorKind::StaleToken`] instead of overwriting newer data.
    ///
    /// The data lives on the first node; for data in another Redis, build a
    /// single-node client on that server. For SQL stores, see the pattern in
    /// docs/protocol.md. `key` must not be one of the client's lock keys
    /// (`<prefix>{…`): that is an [`ErrorKind::InvalidArgument`].
    pub async fn fenced_set(&self, key: &str, value: &str, fence: impl Into<Fence>) -> Result<()> {
        self.shared.ready().await?;
        self.validate_data_key(key)?;
        let fence = fence.into();
        let shared = self.shared.clone();
        let (key, value) = (key.to_owned(), value.to_owned());
        runtime::run(async move {
            let node = &shared.nodes.nodes()[0];
            let (token, holder) = (fence.token.to_string(), fence.holder.to_string());
            let reply = node
                .eval(&scripts::FENCED_SET, &[&key], &[&token, &holder, &value])
                .await;
            fenced_set_outcome(reply, &key, fence, &node.endpoint().to_string())
        })
        .await?
    }

    /// Reads what [`Client::fenced_set`] stored: `(value, fencing token)`.
    pub async fn fenced_get(&self, key: &str) -> Result<Option<(String, u64)>> {
        self.shared.ready().await?;
        self.validate_data_key(key)?;
        let shared = self.shared.clone();
        let key = key.to_owned();
        runtime::run(async move {
            let node = &shared.nodes.nodes()[0];
            match node.eval(&scripts::FENCED_GET, &[&key], &[]).await {
                Ok(redis::Value::Nil) => Ok(None),
                Ok(redis::Value::Array(fields)) if fields.len() == 2 => {
                    let value: String = redis::from_redis_value_ref(&fields[0]).unwrap_or_default();
                    match as_u64(&fields[1]) {
                        Some(fence) => Ok(Some((value, fence))),
                        None => Err(Error::new(
                            ErrorKind::Unavailable,
                            format!(
                                "'{key}' on {} holds a fence that is not a decimal token: {:?}",
                                node.endpoint(),
                                fields[1]
                            ),
                        )),
                    }
                }
                Ok(other) => Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("'{key}' on {} is not a fenced value: {other:?}", node.endpoint()),
                )),
                Err(outcome) => Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("reading '{key}' from {} failed: {outcome}", node.endpoint()),
                )),
            }
        })
        .await?
    }

    /// The nodes, as URLs without credentials.
    pub fn nodes(&self) -> Vec<String> {
        self.shared
            .nodes
            .nodes()
            .iter()
            .map(|n| n.endpoint().to_string())
            .collect()
    }

    /// How many nodes must agree: `n/2 + 1`.
    pub fn quorum(&self) -> usize {
        self.shared.nodes.quorum().needed()
    }

    /// Resolves once the clean-up this client runs in the background has
    /// finished: the undo (a compare-and-delete on every node that may hold
    /// it) of each acquire attempt that was cancelled or failed, and the
    /// part of each release still on its way to slower nodes. Each is
    /// bounded by the connect timeout (for a node reconnecting) plus the
    /// per-node timeout. A call dropped by a caller off any tokio runtime
    /// ([`crate::on_runtime`]), or stopped by a raised
    /// [`crate::Canceller`], is torn down on the internal runtime a moment
    /// after its caller has its answer: that teardown, and the undo it
    /// starts, are waited for too (those of every client).
    ///
    /// Call it before the process exits, under a time limit of your own:
    /// background work dies with the process, and an undo never sent leaves
    /// the attempt's key blocking the resource until its ttl. Locks handed
    /// out are not waited for: release them.
    pub async fn settle(&self) {
        crate::background::abandoned_gone().await;
        self.shared.nodes.background.idle().await;
    }

    /// What this client has counted so far: acquisitions, failures by kind,
    /// losses by reason, releases, renewals, the locks held and the calls
    /// waiting now, and the acquire latency. The same numbers go to the
    /// `metrics` crate's facade as they happen ([`crate::metric_names`]),
    /// for whatever exporter the application installs (before it builds
    /// its clients: a client registers its metrics with the recorder
    /// installed when it is built).
    pub fn metrics(&self) -> crate::Metrics {
        self.shared.metrics.snapshot()
    }

    /// Refuses new operations from now on. Held locks can still be released
    /// and keep being renewed until released or dropped.
    pub fn close(&self) {
        self.shared.close();
    }
}

impl Client {
    /// A fenced data key: 1 to 1024 bytes, and never one of this client's
    /// lock or counter keys, which a write would overwrite.
    fn validate_data_key(&self, key: &str) -> Result<()> {
        if key.is_empty() || key.len() > crate::keys::MAX_RESOURCE_LEN {
            return Err(Error::invalid(format!(
                "the data key must be 1 to {} bytes long",
                crate::keys::MAX_RESOURCE_LEN
            )));
        }
        if LockKeys::could_be_lock_key(&self.shared.key_prefix, key) {
            return Err(Error::invalid(format!(
                "the data key '{key}' has the form of a lock key (prefix '{}' then '{{'); a fenced write there \
                 could overwrite a lock or its fencing counter: keep data keys outside that form",
                self.shared.key_prefix
            )));
        }
        Ok(())
    }
}

/// A decimal reply as a `u64` (fences may exceed `i64::MAX`).
fn as_u64(value: &redis::Value) -> Option<u64> {
    match value {
        redis::Value::Int(n) => u64::try_from(*n).ok(),
        redis::Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        _ => None,
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("nodes", &self.nodes())
            .field("quorum", &self.quorum())
            .field("key_prefix", &self.shared.key_prefix)
            .finish_non_exhaustive()
    }
}

//! What operators see: each node's view of a lock ([`Client::inspect`]) and
//! the locks a client's prefix has on its nodes ([`Client::resources`]).
//! Read-only, and never the owner's token.

use std::collections::BTreeSet;

use crate::client::Client;
use crate::error::{Error, ErrorKind, NodeOutcome, Result};
use crate::keys::LockKeys;
use crate::node::{Reply, as_i64};
use crate::runtime;
use crate::scripts;

/// One node's view of a lock, for operators (never the owner's token).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeLockState {
    /// The node, without credentials.
    pub node: String,
    /// Whether the lock key exists there.
    pub held: bool,
    /// Its remaining ttl in ms, if it exists and has one.
    pub ttl_ms: Option<u64>,
    /// The resource's fencing counter on that node: how many grants it has
    /// counted there, ever.
    pub fencing_counter: u64,
    /// The waiters in the lock's queue there whose lease is still running
    /// (docs/protocol.md §4.9).
    pub waiters: u64,
    /// The error, if the node did not answer.
    pub error: Option<String>,
}

impl Client {
    /// Each node's view of `resource`: held or not, ttl, fencing counter,
    /// waiters. One read-only script per node (STATUS, docs/protocol.md §3.7).
    pub async fn inspect(&self, resource: &str) -> Result<Vec<NodeLockState>> {
        let shared = self.shared().clone();
        shared.ready().await?;
        let keys = LockKeys::new(&shared.key_prefix, resource)?;
        runtime::run(async move {
            let replies = shared
                .nodes
                .everywhere(
                    &scripts::STATUS,
                    &[keys.lock(), keys.fence(), keys.leases()],
                    &[] as &[&str],
                    shared.connect_timeout,
                    |_| true,
                )
                .await;
            shared
                .nodes
                .nodes()
                .iter()
                .zip(replies)
                .map(|(node, reply)| node_lock_state(node.endpoint().to_string(), reply))
                .collect()
        })
        .await
    }

    /// The locks (and elections) of this client's prefix whose name matches
    /// the Redis glob `matching` (`*` for all), as found on the nodes that
    /// answer: every resource that has a fencing counter on one of them,
    /// sorted, at most `limit` (per node; `SCAN`, which needs the `+scan`
    /// right). Semaphores and read-write locks are not listed.
    ///
    /// On a PostgreSQL server the same keys are read from its key table.
    ///
    /// Fails with `invalid_argument` when a node is a Redis Cluster (one
    /// `SCAN` does not visit its shards): inspect resources by name there;
    /// with `auth` when every node refused `SCAN`, and with `unavailable`
    /// when no node answered.
    pub async fn resources(&self, matching: &str, limit: usize) -> Result<Vec<String>> {
        let shared = self.shared().clone();
        shared.ready().await?;
        let prefix = shared.key_prefix.clone();
        let pattern = LockKeys::counter_pattern(&prefix, matching);
        runtime::run(async move {
            let nodes = shared.nodes.nodes();
            if let Some((node, why)) = nodes.iter().find_map(|node| Some((node, node.unscannable()?))) {
                return Err(Error::invalid(format!(
                    "node {} is {why}; inspect them by name",
                    node.endpoint()
                )));
            }
            let scans = nodes.iter().map(|node| node.scan(&pattern, limit));
            let replies = futures_util::future::join_all(scans).await;
            let mut found = BTreeSet::new();
            let mut failures = Vec::new();
            let mut refused = 0;
            for (node, reply) in nodes.iter().zip(replies) {
                match reply {
                    Ok(keys) => found.extend(
                        keys.iter()
                            .filter_map(|key| LockKeys::resource_of_counter(&prefix, key)),
                    ),
                    Err(outcome) => {
                        let is_refusal =
                            matches!(&outcome, NodeOutcome::Failed(f) if f.kind == ErrorKind::Auth);
                        refused += usize::from(is_refusal);
                        failures.push(format!("{}: {outcome}", node.endpoint()));
                    }
                }
            }
            if failures.len() == nodes.len() {
                let kind = if refused == nodes.len() {
                    ErrorKind::Auth
                } else {
                    ErrorKind::Unavailable
                };
                return Err(Error::new(
                    kind,
                    format!(
                        "no node answered SCAN ({}); check that they are up and that the user has +scan",
                        failures.join("; ")
                    ),
                ));
            }
            Ok(found.into_iter().take(limit).collect())
        })
        .await?
    }
}

fn node_lock_state(node: String, reply: Option<Reply>) -> NodeLockState {
    let mut state = NodeLockState {
        node,
        held: false,
        ttl_ms: None,
        fencing_counter: 0,
        waiters: 0,
        error: None,
    };
    let count = |value: &redis::Value| as_i64(value).and_then(|n| u64::try_from(n).ok());
    match reply {
        Some(Ok(redis::Value::Array(fields))) if fields.len() == 4 => {
            state.held = as_i64(&fields[0]) == Some(1);
            state.ttl_ms = count(&fields[1]);
            state.fencing_counter = count(&fields[2]).unwrap_or(0);
            state.waiters = count(&fields[3]).unwrap_or(0);
        }
        Some(Ok(other)) => state.error = Some(format!("unexpected reply {other:?}")),
        Some(Err(outcome)) => state.error = Some(outcome.to_string()),
        None => state.error = Some(NodeOutcome::Pending.to_string()),
    }
    state
}

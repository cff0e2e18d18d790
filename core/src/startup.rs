//! A client's first connection to its nodes: started when the client is
//! made, awaited by its first operations (and by [`ClientBuilder::build`]).
//!
//! [`ClientBuilder::build`]: crate::ClientBuilder::build

use std::sync::{Arc, OnceLock};

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};

use crate::endpoint::Topology;
use crate::error::{Error, ErrorKind, NodeOutcome, Result};
use crate::node_set::NodeSet;

/// The outcome of connecting every node once: `Ok` when no node refused the
/// configuration (unreachable nodes are retried on use), else the refusal.
pub(crate) struct Startup {
    /// The outcome once known: the fast path of every later operation.
    outcome: OnceLock<Result<()>>,
    /// The connection under way, shared by every operation waiting for it.
    connecting: Shared<BoxFuture<'static, Result<()>>>,
}

impl Startup {
    /// Connects every node on `runtime`, in the background. Should that
    /// runtime shut down first, the client still works: its nodes connect
    /// when operations need them.
    pub(crate) fn spawn(nodes: Arc<NodeSet>, runtime: &tokio::runtime::Handle) -> Self {
        let task = runtime.spawn(async move { warm_up(&nodes).await });
        let connecting = async move {
            match task.await {
                Ok(outcome) => outcome,
                // The caller's runtime shut down first: each node connects on use instead.
                Err(stopped) if stopped.is_cancelled() => Ok(()),
                Err(_) => Err(Error::panicked("connecting the client's nodes")),
            }
        };
        Startup {
            outcome: OnceLock::new(),
            connecting: connecting.boxed().shared(),
        }
    }

    /// Waits for the connection to end: the configuration error a node
    /// reported (refused credentials, failed TLS), or `Ok`.
    pub(crate) async fn finished(&self) -> Result<()> {
        if let Some(outcome) = self.outcome.get() {
            return outcome.clone();
        }
        let outcome = self.connecting.clone().await;
        self.outcome.get_or_init(|| outcome).clone()
    }
}

/// Connects every node in parallel. Unreachable nodes are left for later
/// (a quorum may still be up); refused credentials and TLS failures are
/// configuration errors.
async fn warm_up(nodes: &NodeSet) -> Result<()> {
    let results = futures_util::future::join_all(nodes.nodes().iter().map(|node| node.warm_up())).await;
    for (node, result) in nodes.nodes().iter().zip(results) {
        match result {
            Ok(()) => {}
            Err(NodeOutcome::Failed(failure))
                if matches!(failure.kind, ErrorKind::Auth | ErrorKind::Tls | ErrorKind::Config) =>
            {
                let postgres = node.endpoint().topology == Topology::Postgres;
                // A PostgreSQL failure carries its own advice (postgres.rs).
                let advice = match failure.kind {
                    _ if postgres => "",
                    ErrorKind::Auth => "; check the user name, password and ACL rules",
                    ErrorKind::Tls => "; check the CA, the certificate's host name and the rediss:// URL",
                    _ => "",
                };
                return Err(Error::new(
                    failure.kind,
                    format!(
                        "node {} refused the connection: {}{advice}",
                        node.endpoint(),
                        failure.detail
                    ),
                ));
            }
            Err(outcome) => {
                tracing::warn!(node = %node.endpoint(), %outcome, "node unreachable at start; will retry on use");
            }
        }
    }
    Ok(())
}

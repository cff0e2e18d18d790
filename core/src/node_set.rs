//! The nodes of one client, and the requests that go to all of them.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::background::Background;
use crate::compare_and_act::{CompareAndAct, compare_and_act, read_compare_and_act};
use crate::endpoint::Topology;
use crate::error::{NodeOutcome, NodeReport};
use crate::lease::{Leases, Outcome, Validity};
use crate::node::{Delivery, Node, Prepared, Reply};
use crate::quorum::{Decided, Quorum, by_quorum, decide, gather};
use crate::scripts::LuaScript;

/// Every node of a client with its majority rule and drift factor.
pub(crate) struct NodeSet {
    nodes: Vec<Node>,
    quorum: Quorum,
    drift_factor: f64,
    /// Clean-ups running in the background (the undo of abandoned acquire
    /// attempts, the rest of a release), so a process about to exit can wait for them.
    pub(crate) background: Arc<Background>,
    handoff: Handoff,
}

/// How a release hands the lock to a waiter on these nodes (the last two
/// arguments of RELEASE and LEAVE, docs/protocol.md §3.2).
pub(crate) struct Handoff {
    /// How long a hand-off stays reserved for the woken waiter: twice the
    /// per-node timeout, so a waiter that is merely slow still gets it.
    pub(crate) window: Duration,
    /// `"1"` when a waiter whose channel has no listener may be skipped:
    /// only where `PUBLISH` counts every listener, which a Redis Cluster
    /// (counting its own node's only) does not.
    pub(crate) counted: &'static str,
}

impl Handoff {
    /// The window as scripts take it: decimal milliseconds.
    pub(crate) fn window_ms(&self) -> String {
        self.window.as_millis().to_string()
    }

    fn of(nodes: &[Node]) -> Self {
        let timeout = nodes.iter().map(Node::request_timeout).max().unwrap_or_default();
        // A PostgreSQL node counts its listeners by their advisory locks
        // (docs/postgres-store.md), as a single Redis server counts subscribers.
        let counted = nodes.iter().all(|node| {
            matches!(
                node.endpoint().topology,
                Topology::Standalone | Topology::Postgres
            )
        });
        let window = (timeout * 2).max(Duration::from_millis(1));
        Handoff {
            window,
            counted: if counted { "1" } else { "0" },
        }
    }
}

impl NodeSet {
    pub(crate) fn new(nodes: Vec<Node>, drift_factor: f64) -> Self {
        let quorum = Quorum::of(nodes.len());
        NodeSet {
            handoff: Handoff::of(&nodes),
            nodes,
            quorum,
            drift_factor,
            background: Arc::default(),
        }
    }

    pub(crate) fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// How a release hands the lock on here.
    pub(crate) fn handoff(&self) -> &Handoff {
        &self.handoff
    }

    pub(crate) fn quorum(&self) -> Quorum {
        self.quorum
    }

    /// How long one request to a node may take: the longest per-node
    /// timeout, as for the hand-off window.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.nodes
            .iter()
            .map(Node::request_timeout)
            .max()
            .unwrap_or_default()
    }

    /// The Redlock safety margin subtracted from every validity: `ttl·drift + 2 ms`.
    pub(crate) fn safety_margin(&self, ttl: Duration) -> Duration {
        ttl.mul_f64(self.drift_factor) + Duration::from_millis(2)
    }

    /// When a lock granted (or renewed) by requests sent at `sent` with `ttl`
    /// stops being safe to rely on, or `None` if it already has.
    pub(crate) fn valid_until(&self, sent: Instant, ttl: Duration) -> Option<Instant> {
        let until = sent + ttl.checked_sub(self.safety_margin(ttl))?;
        (until > Instant::now()).then_some(until)
    }

    /// Until when `leases` leave the lock valid on a quorum (see [`crate::lease`]).
    pub(crate) fn validity(&self, leases: &Leases) -> Option<Validity> {
        leases.validity(self.quorum, |ttl| self.safety_margin(ttl))
    }

    /// Sends one script to every node in parallel on the foreground
    /// connections and returns when the quorum decides, with the requests
    /// still on their way (see [`crate::quorum::Stragglers`]). A node with no
    /// connection up fails at once.
    pub(crate) async fn decide(
        self: &Arc<Self>,
        script: &'static LuaScript,
        keys: &[&str],
        args: &[&str],
        is_yes: impl Fn(&Reply) -> bool,
    ) -> Decided<Reply, impl Future<Output = (usize, Reply)> + Send + 'static> {
        let call = Prepared::new(script, keys, args);
        self.send_until(call, by_quorum(self.quorum, is_yes)).await
    }

    /// [`NodeSet::decide`] with a decision rule of the caller's: `decided`
    /// is told each node's reply (with the node's index) as it comes, and
    /// says when the outcome is settled.
    pub(crate) async fn send_until(
        self: &Arc<Self>,
        call: Prepared,
        decided: impl FnMut(usize, &Reply) -> bool,
    ) -> Decided<Reply, impl Future<Output = (usize, Reply)> + Send + 'static> {
        if let [node] = self.nodes.as_slice() {
            // Single-node mode, the hottest path: nothing to race or leave
            // behind, so no futures set to build.
            return Decided::settled(vec![Some(node.eval_prepared(&call).await)]);
        }
        let call = Arc::new(call);
        let requests = (0..self.nodes.len()).map(|index| {
            let (nodes, call) = (self.clone(), call.clone());
            async move { (index, nodes.nodes[index].eval_prepared(&call).await) }
        });
        gather(requests, decided).await
    }

    /// [`NodeSet::decide`] for a request that changes a held lock's ttl: it
    /// goes on the background connections (where renewals go, so a lock's
    /// ttl changes reach each node in order), and the result says which
    /// connection each node's request went on, for [`crate::lease`].
    ///
    /// `on_sending` is told, just before anything is sent, each node's part
    /// as it stands then (unknown where the request goes, since it may land
    /// any moment; not sent elsewhere): the lock must count with the new ttl
    /// while the request is under way, not only once it is decided.
    pub(crate) async fn decide_ttl_change(
        self: &Arc<Self>,
        script: &'static LuaScript,
        keys: &[&str],
        args: &[&str],
        is_yes: impl Fn(&Reply) -> bool,
        on_sending: impl FnOnce(&mut dyn Iterator<Item = Outcome>),
    ) -> TtlChange<impl Future<Output = (usize, Reply)> + Send + 'static> {
        let call = Arc::new(Prepared::ttl_change(script, keys, args));
        // Chosen before anything is sent: which connection a request went on
        // is then known even if the decision comes before its answer.
        let connections: Vec<_> = self.nodes.iter().map(Node::background).collect();
        let generations: Vec<Option<u32>> = connections
            .iter()
            .map(|c| c.as_ref().ok().map(|live| live.generation))
            .collect();
        on_sending(&mut generations.iter().map(|generation| outcome(*generation, None)));
        let requests = connections.into_iter().enumerate().map(|(index, connection)| {
            let (nodes, call) = (self.clone(), call.clone());
            async move {
                let reply = match connection {
                    Ok(live) => {
                        let node = &nodes.nodes[index];
                        node.send(live, &call, node.request_timeout()).await
                    }
                    Err(outcome) => Err(outcome),
                };
                (index, reply)
            }
        });
        TtlChange {
            decided: decide(requests, self.quorum, is_yes).await,
            generations,
        }
    }

    /// Sends one script to the chosen nodes and waits for every reply (each
    /// bounded by the per-node timeout, after waiting up to `patience` for a
    /// node's connection to come back). For work that must reach every node
    /// and is not in a hurry: undoing a failed attempt, inspecting a lock.
    pub(crate) async fn everywhere(
        &self,
        script: &'static LuaScript,
        keys: &[&str],
        args: &[impl AsRef<[u8]>],
        patience: Duration,
        only: impl Fn(usize) -> bool,
    ) -> Vec<Option<Reply>> {
        let (only, call) = (&only, &Prepared::new(script, keys, args));
        let requests = self.nodes.iter().enumerate().map(|(i, node)| async move {
            if only(i) {
                Some(node.eval_patiently(call, patience).await)
            } else {
                None
            }
        });
        futures_util::future::join_all(requests).await
    }

    /// [`NodeSet::everywhere`] in the background on the internal runtime,
    /// counted for `Client::settle`: clean-up nobody waits for (an undo, the
    /// rest of a release, a waiter leaving the queue). It runs even when the
    /// caller's future is dropped. Returns its task, for a caller that
    /// must not overtake it (`None`: no runtime to run it on).
    pub(crate) fn everywhere_in_background(
        self: &Arc<Self>,
        script: &'static LuaScript,
        keys: Vec<String>,
        args: Vec<String>,
        patience: Duration,
        only: impl Fn(usize) -> bool + Send + Sync + 'static,
    ) -> Option<JoinHandle<()>> {
        let runtime = crate::runtime::handle().ok()?;
        let (nodes, running) = (self.clone(), self.background.start());
        Some(runtime.spawn(async move {
            let _running = running;
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            nodes.everywhere(script, &keys, &args, patience, only).await;
        }))
    }

    /// Per-node reports for an error message, reading replies with `describe`.
    pub(crate) fn reports(
        &self,
        replies: &[Option<Reply>],
        describe: impl Fn(&redis::Value) -> NodeOutcome,
    ) -> Vec<NodeReport> {
        self.nodes
            .iter()
            .zip(replies)
            .map(|(node, reply)| NodeReport {
                node: node.endpoint().to_string(),
                outcome: match reply {
                    None => NodeOutcome::Pending,
                    Some(Ok(value)) => describe(value),
                    Some(Err(outcome)) => outcome.clone(),
                },
            })
            .collect()
    }
}

/// A ttl change decided by quorum, with the connection each request went on.
pub(crate) struct TtlChange<F: Future> {
    pub(crate) decided: Decided<Reply, F>,
    /// Per node, the connection its request went on; `None`: never sent.
    generations: Vec<Option<u32>>,
}

impl<F: Future> TtlChange<F> {
    /// Each node's part, for [`crate::lease::Leases::record`]. A node with
    /// no reply yet, a timeout or a failure may still apply the request.
    pub(crate) fn outcomes(&self) -> impl Iterator<Item = Outcome> + '_ {
        self.generations
            .iter()
            .zip(&self.decided.replies)
            .map(|(generation, reply)| outcome(*generation, reply.as_ref()))
    }
}

/// One node's part in a ttl change: sent on `generation` (if at all), answered with `reply` (if yet).
pub(crate) fn outcome(generation: Option<u32>, reply: Option<&Reply>) -> Outcome {
    let Some(generation) = generation else {
        return Outcome {
            delivery: Delivery::NotSent,
            answer: None,
        };
    };
    match reply {
        Some(Ok(value)) => Outcome {
            delivery: Delivery::Answered(generation),
            answer: read_compare_and_act(value),
        },
        _ => Outcome {
            delivery: Delivery::Unknown(generation),
            answer: None,
        },
    }
}

/// Tallies compare-and-act replies: (done, definitely not ours, any held by other).
pub(crate) fn tally<'a>(replies: impl IntoIterator<Item = Option<&'a Reply>>) -> (usize, usize, bool) {
    let mut done = 0;
    let mut not_ours = 0;
    let mut taken = false;
    for reply in replies.into_iter().flatten() {
        match compare_and_act(reply) {
            Some(CompareAndAct::Done) => done += 1,
            Some(CompareAndAct::HeldByOther) => {
                not_ours += 1;
                taken = true;
            }
            Some(CompareAndAct::Missing) => not_ours += 1,
            None => {}
        }
    }
    (done, not_ours, taken)
}

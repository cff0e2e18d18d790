//! What a client knows of each node's copy of a held lock's key, and the
//! validity that follows from it (docs/protocol.md §4.5).
//!
//! A request that changes the key's ttl (a renewal or an `extend`) can be
//! applied by a node long after the client stopped waiting for it: its reply
//! was late or lost, or it was still on its way when the quorum decided.
//! Applied late, it sets the key's remaining time to *its* ttl, which may be
//! shorter than what a later, confirmed request set. So for every node the
//! client keeps:
//!
//! - the send time and ttl of the last request the node confirmed, and
//! - the shortest ttl among requests whose fate there is unknown.
//!
//! A request applied after the confirmed one was applied no earlier than
//! the confirmed one was sent, so the key lives there at least until
//! `confirmed send time + min(confirmed ttl, unknown ttls)`, minus the
//! safety margin. The lock is valid until the quorum-th latest of these
//! per-node times: that many nodes still hold the key, so nobody else can
//! win a majority before then.
//!
//! Requests on one connection run in order, so an answer on a connection
//! settles every unknown request sent before it on that connection. Unknown
//! requests on a connection that has since been replaced can land at any
//! time; they stay counted for the life of the lock.

use std::time::{Duration, Instant};

use crate::compare_and_act::CompareAndAct;
use crate::node::Delivery;
use crate::quorum::Quorum;

/// Every node's copy of one lock's key, as far as the client knows.
#[derive(Clone, Debug)]
pub(crate) struct Leases {
    nodes: Box<[NodeLease]>,
}

#[derive(Clone, Copy, Debug, Default)]
struct NodeLease {
    /// Send time and ttl of the last request this node confirmed; `None`
    /// when the key is not (known to be) ours there.
    confirmed: Option<(Instant, Duration)>,
    /// The shortest ttl among unanswered requests on connection `.0`.
    unknown: Option<(u32, Duration)>,
    /// The shortest ttl among unanswered requests on connections that have
    /// been replaced since: nothing will ever settle them.
    stranded: Option<Duration>,
}

/// One node's part in a request that changed (or tried to change) the ttl.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) delivery: Delivery,
    /// The node's answer, when it gave one the protocol knows.
    pub(crate) answer: Option<CompareAndAct>,
}

/// Until when a lock is valid, and the ttl that decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Validity {
    pub(crate) until: Instant,
    /// The ttl (possibly shortened by unknown requests) behind `until`:
    /// renewals fall due after a third of it.
    pub(crate) ttl: Duration,
}

impl Leases {
    /// After a grant sent at `sent` with `ttl`, held on the nodes where `granted` is true.
    pub(crate) fn granted(granted: impl IntoIterator<Item = bool>, sent: Instant, ttl: Duration) -> Self {
        let nodes = granted
            .into_iter()
            .map(|held| NodeLease {
                confirmed: held.then_some((sent, ttl)),
                ..NodeLease::default()
            })
            .collect();
        Leases { nodes }
    }

    /// Takes in each node's part in a ttl change sent at `sent` with `ttl`.
    pub(crate) fn record(
        &mut self,
        sent: Instant,
        ttl: Duration,
        outcomes: impl IntoIterator<Item = Outcome>,
    ) {
        for (node, outcome) in self.nodes.iter_mut().zip(outcomes) {
            node.record(sent, ttl, outcome);
        }
    }

    /// Until when a quorum surely holds the key, with `margin(ttl)` taken
    /// off each node's time; `None` when fewer than a quorum hold it.
    pub(crate) fn validity(&self, quorum: Quorum, margin: impl Fn(Duration) -> Duration) -> Option<Validity> {
        let held = || self.nodes.iter().filter_map(|node| node.held_until(&margin));
        // The quorum-th latest time: that many nodes hold the key at least
        // until then. (A handful of nodes: no sorting buffer needed.)
        held()
            .filter(|candidate| quorum.reached(held().filter(|other| other.until >= candidate.until).count()))
            .max_by_key(|candidate| candidate.until)
    }
}

impl NodeLease {
    fn record(&mut self, sent: Instant, ttl: Duration, outcome: Outcome) {
        match outcome.delivery {
            Delivery::NotSent => {}
            Delivery::Unknown(connection) => self.add_unknown(connection, ttl),
            Delivery::Answered(connection) => {
                self.settle_before(connection);
                match outcome.answer {
                    Some(CompareAndAct::Done) => self.confirmed = Some((sent, ttl)),
                    // An EXTEND never re-creates a key: it stays lost here.
                    Some(CompareAndAct::HeldByOther | CompareAndAct::Missing) => self.confirmed = None,
                    // An error reply: the node ran nothing.
                    None => {}
                }
            }
        }
    }

    fn add_unknown(&mut self, connection: u32, ttl: Duration) {
        match self.unknown {
            Some((same, shortest)) if same == connection => self.unknown = Some((same, shortest.min(ttl))),
            Some((_, replaced)) => {
                self.strand(replaced);
                self.unknown = Some((connection, ttl));
            }
            None => self.unknown = Some((connection, ttl)),
        }
    }

    /// An answer on `connection` settles what was sent before it there; what
    /// is unknown on another (replaced) connection stays unsettled for good.
    fn settle_before(&mut self, connection: u32) {
        match self.unknown.take() {
            Some((same, _)) if same == connection => {}
            Some((_, replaced)) => self.strand(replaced),
            None => {}
        }
    }

    fn strand(&mut self, ttl: Duration) {
        self.stranded = Some(self.stranded.map_or(ttl, |t| t.min(ttl)));
    }

    fn held_until(&self, margin: impl Fn(Duration) -> Duration) -> Option<Validity> {
        let (sent, confirmed_ttl) = self.confirmed?;
        let ttl = [self.unknown.map(|(_, t)| t), self.stranded]
            .into_iter()
            .flatten()
            .fold(confirmed_ttl, Duration::min);
        let until = sent + ttl.checked_sub(margin(ttl))?;
        Some(Validity { until, ttl })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn margin(ttl: Duration) -> Duration {
        ttl / 100 + Duration::from_millis(2)
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn done(connection: u32) -> Outcome {
        Outcome {
            delivery: Delivery::Answered(connection),
            answer: Some(CompareAndAct::Done),
        }
    }

    fn unknown(connection: u32) -> Outcome {
        Outcome {
            delivery: Delivery::Unknown(connection),
            answer: None,
        }
    }

    fn missing(connection: u32) -> Outcome {
        Outcome {
            delivery: Delivery::Answered(connection),
            answer: Some(CompareAndAct::Missing),
        }
    }

    fn three_nodes_granted(at: Instant, ttl: Duration) -> Leases {
        Leases::granted([true, true, true], at, ttl)
    }

    fn until(leases: &Leases) -> Option<Instant> {
        leases.validity(Quorum::of(3), margin).map(|v| v.until)
    }

    #[test]
    fn a_grant_is_valid_for_ttl_minus_the_margin() {
        let t0 = Instant::now();
        let leases = three_nodes_granted(t0, s(10));
        assert_eq!(until(&leases), Some(t0 + s(10) - margin(s(10))));
        let one_node = Leases::granted([true, false, false], t0, s(10));
        assert_eq!(until(&one_node), None, "one node of three is no quorum");
    }

    #[test]
    fn a_failed_extend_to_a_shorter_ttl_shortens_the_validity() {
        // The scenario: ttl 60 s, extend(10 s) confirmed by node 1
        // only; nodes 2 and 3 may still apply it.
        let t0 = Instant::now();
        let mut leases = three_nodes_granted(t0, s(60));
        let sent = t0 + s(1);
        leases.record(sent, s(10), [done(1), unknown(1), unknown(1)]);
        let validity = leases.validity(Quorum::of(3), margin).unwrap();
        assert_eq!(validity.until, t0 + s(10) - margin(s(10)));
        assert_eq!(validity.ttl, s(10));
    }

    #[test]
    fn a_failed_extend_to_a_longer_ttl_changes_nothing() {
        let t0 = Instant::now();
        let mut leases = three_nodes_granted(t0, s(10));
        leases.record(t0 + s(1), s(60), [unknown(1), unknown(1), unknown(1)]);
        assert_eq!(until(&leases), Some(t0 + s(10) - margin(s(10))));
    }

    #[test]
    fn an_unanswered_renewal_caps_a_later_longer_extend_until_answered() {
        // A renewal (ttl 10 s) gets no answer from nodes 2 and 3; an extend
        // to 60 s then succeeds everywhere, but on another connection: the
        // renewal may still land after it and cut the key to 10 s.
        let t0 = Instant::now();
        let mut leases = three_nodes_granted(t0, s(10));
        leases.record(t0 + s(3), s(10), [done(1), unknown(1), unknown(1)]);
        let extend_at = t0 + s(4);
        leases.record(extend_at, s(60), [done(1), done(2), done(2)]);
        assert_eq!(
            until(&leases),
            Some(extend_at + s(10) - margin(s(10))),
            "a renewal stranded on a replaced connection may land any time"
        );
        // On the same connection the extend's answer settles the renewal.
        let mut same = three_nodes_granted(t0, s(10));
        same.record(t0 + s(3), s(10), [done(1), unknown(1), unknown(1)]);
        same.record(extend_at, s(60), [done(1), done(1), done(1)]);
        assert_eq!(until(&same), Some(extend_at + s(60) - margin(s(60))));
    }

    #[test]
    fn a_stranded_request_stays_counted_for_good() {
        let t0 = Instant::now();
        let mut leases = three_nodes_granted(t0, s(10));
        leases.record(t0 + s(1), s(2), [unknown(1), unknown(1), done(1)]);
        // Nodes 1 and 2 got new connections; their renewals are answered.
        for k in 2..5 {
            leases.record(t0 + s(k), s(10), [done(2), done(2), done(1)]);
        }
        let last = t0 + s(4);
        assert_eq!(until(&leases), Some(last + s(2) - margin(s(2))));
    }

    #[test]
    fn nodes_that_lost_the_key_no_longer_count() {
        let t0 = Instant::now();
        let mut leases = three_nodes_granted(t0, s(10));
        leases.record(t0 + s(1), s(10), [done(1), missing(1), unknown(1)]);
        // Node 1 renewed at 1 s, node 3 still holds the grant's key.
        assert_eq!(until(&leases), Some(t0 + s(10) - margin(s(10))));
        leases.record(t0 + s(2), s(10), [done(1), unknown(1), missing(1)]);
        assert_eq!(until(&leases), None, "only node 1 is left");
    }

    #[test]
    fn a_request_that_was_never_sent_changes_nothing() {
        let t0 = Instant::now();
        let mut leases = three_nodes_granted(t0, s(10));
        let not_sent = Outcome {
            delivery: Delivery::NotSent,
            answer: None,
        };
        leases.record(t0 + s(1), s(1), [not_sent, not_sent, not_sent]);
        assert_eq!(until(&leases), Some(t0 + s(10) - margin(s(10))));
    }
}

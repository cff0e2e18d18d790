//! Fencing tokens: strictly increasing per resource, also under Redlock.
//!
//! Each node's acquire script `INCR`s that node's counter for the resource.
//! Single node: that value is the token, issued atomically with the grant.
//! Redlock: the token is the maximum over the granting nodes, and before the
//! lock is handed out a majority must *vouch* for it: nodes that granted
//! this attempt and whose counter is now at least the token, because they
//! reported it or confirmed a raise to it. Our key sat on such a node from
//! our `INCR` until after the hand-out, so any later grant's `INCR` there
//! comes after the counter reached the token. Any later majority shares a
//! node with the vouching one, so its maximum exceeds this token. A node
//! that did not grant vouches for nothing, even if it confirms the raise:
//! another client's `INCR` may have come there before our raise
//! (docs/protocol.md §4.4). When a majority already reported the maximum
//! (the steady state), the raise is skipped: no extra round trip. Assumes
//! counters survive restarts (AOF).

use std::sync::Arc;

use crate::node::{Prepared, Reply};
use crate::node_set::NodeSet;
use crate::quorum::Quorum;
use crate::scripts;

/// The largest fencing token, 2^53 − 1. ACQUIRE returns the counter through
/// Lua, whose numbers are doubles: above this, grants could be rounded and
/// repeat (docs/protocol.md §2.2), so a larger reply counts as a failure of
/// that node. At a million grants a second the range lasts 285 years.
pub const MAX_FENCING_TOKEN: u64 = (1 << 53) - 1;

/// What one node can say for an attempt's token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Vouch {
    /// Granted, reporting the token itself.
    AtToken,
    /// Granted with a lower counter: vouches once it confirms the raise.
    Below,
    /// Did not grant (refused, failed or not yet answered): vouches for
    /// nothing, whatever it answers to the raise.
    Never,
}

/// An attempt's fencing token, from each node's grant.
#[derive(Debug)]
pub(crate) struct FencingToken<'a> {
    value: u64,
    /// Per node, the counter its grant returned; `None`: no grant.
    counters: &'a [Option<u64>],
}

impl<'a> FencingToken<'a> {
    /// The token from each node's grant, or `None` when no node granted.
    pub(crate) fn from_grants(counters: &'a [Option<u64>]) -> Option<Self> {
        let value = counters.iter().flatten().copied().max()?;
        Some(FencingToken { value, counters })
    }

    pub(crate) fn value(&self) -> u64 {
        self.value
    }

    /// True when a majority reported the token: nothing to raise.
    pub(crate) fn ready(&self, quorum: Quorum) -> bool {
        quorum.reached(self.count(Vouch::AtToken))
    }

    fn vouch(&self, node: usize) -> Vouch {
        match self.counters[node] {
            Some(counter) if counter == self.value => Vouch::AtToken,
            Some(_) => Vouch::Below,
            None => Vouch::Never,
        }
    }

    fn count(&self, vouch: Vouch) -> usize {
        (0..self.counters.len())
            .filter(|&node| self.vouch(node) == vouch)
            .count()
    }
}

/// Tallies the raise's replies: which nodes vouch, and whether enough still can.
struct Tally<'a> {
    token: &'a FencingToken<'a>,
    quorum: Quorum,
    vouching: usize,
    /// Vouching nodes plus those that still could.
    possible: usize,
}

impl<'a> Tally<'a> {
    fn new(token: &'a FencingToken<'a>, quorum: Quorum) -> Self {
        let vouching = token.count(Vouch::AtToken);
        Tally {
            token,
            quorum,
            vouching,
            possible: vouching + token.count(Vouch::Below),
        }
    }

    /// Takes in node `node`'s raise reply; true once the outcome is settled.
    fn reply(&mut self, node: usize, raised: bool) -> bool {
        if self.token.vouch(node) == Vouch::Below {
            if raised {
                self.vouching += 1;
            } else {
                self.possible -= 1;
            }
        }
        self.vouched() || !self.quorum.reached(self.possible)
    }

    fn vouched(&self) -> bool {
        self.quorum.reached(self.vouching)
    }
}

/// Raises the counter to at least the token on every node, until a
/// majority vouches for it or no longer can; `Err` with the replies when it
/// cannot. Nodes that did not grant are raised as well, which heals a
/// lagging counter, but do not count.
pub(crate) async fn raise_to(
    nodes: &Arc<NodeSet>,
    fence_key: &str,
    token: &FencingToken<'_>,
) -> std::result::Result<(), Vec<Option<Reply>>> {
    let value = token.value.to_string();
    let mut tally = Tally::new(token, nodes.quorum());
    let decided = nodes
        .send_until(
            Prepared::new(&scripts::RAISE_FENCE, &[fence_key], &[value.as_str()]),
            |node, reply| tally.reply(node, reply.is_ok()),
        )
        .await;
    // Raising is idempotent: the slower nodes' counters may as well catch up.
    decided.stragglers.finish_in_background();
    if tally.vouched() {
        Ok(())
    } else {
        Err(decided.replies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(counters: &[Option<u64>]) -> FencingToken<'_> {
        FencingToken::from_grants(counters).unwrap()
    }

    #[test]
    fn token_is_max_and_raise_only_without_majority_agreement() {
        let q = Quorum::of(5);
        assert!(token(&[Some(7), Some(7), Some(7), None, None]).ready(q));
        let raised = token(&[Some(7), Some(9), Some(7), None, None]);
        assert_eq!(raised.value(), 9);
        assert!(!raised.ready(q));
        assert!(token(&[Some(9), Some(9), Some(7), Some(9), None]).ready(q));
        assert!(token(&[Some(4)]).ready(Quorum::of(1)));
        assert!(FencingToken::from_grants(&[None, None, None]).is_none());
    }

    #[test]
    fn only_granting_nodes_vouch_for_a_raise() {
        let q = Quorum::of(3);
        // Nodes 0 and 1 granted (5 and 3), node 2 did not.
        let token = token(&[Some(5), Some(3), None]);
        let mut tally = Tally::new(&token, q);
        assert!(
            !tally.reply(2, true),
            "a raise confirmed where we hold no key counted"
        );
        assert!(tally.reply(1, true));
        assert!(tally.vouched());

        let mut failed = Tally::new(&token, q);
        assert!(failed.reply(1, false), "settled: no node left that could vouch");
        assert!(!failed.vouched());
    }
}

//! Fencing tokens: strictly increasing per resource, also under Redlock.
//!
//! Each node's acquire script `INCR`s that node's counter for the resource.
//! Single node: that value is the token, issued atomically with the grant.
//! Redlock: the token is the maximum over the granting nodes, and before the
//! lock is handed out the counter is raised to at least that value on a
//! majority. Any later majority shares a node with that majority, so its
//! `INCR` there exceeds this token, and so does the maximum it takes. When a
//! majority already reported the maximum (the steady state), the raise is
//! skipped: no extra round trip. Assumes counters survive restarts (AOF).

use std::sync::Arc;

use crate::node::Reply;
use crate::node_set::NodeSet;
use crate::quorum::Quorum;
use crate::scripts;

/// The largest fencing token, 2^53 − 1. ACQUIRE returns the counter through
/// Lua, whose numbers are doubles: above this, grants could be rounded and
/// repeat (docs/protocol.md §2.2), so a larger reply counts as a failure of
/// that node. At a million grants a second the range lasts 285 years.
pub const MAX_FENCING_TOKEN: u64 = (1 << 53) - 1;

/// The token from the counters reported by the granting nodes, and whether a
/// majority must still be raised to it.
pub(crate) fn token_from_grants(counters: &[u64], quorum: Quorum) -> Option<(u64, bool)> {
    let max = *counters.iter().max()?;
    let agreeing = counters.iter().filter(|&&c| c == max).count();
    Some((max, !quorum.reached(agreeing)))
}

/// Raises the counter to at least `token` on a majority of nodes.
pub(crate) async fn raise_to(
    nodes: &Arc<NodeSet>,
    fence_key: &str,
    token: u64,
) -> std::result::Result<(), Vec<Option<Reply>>> {
    let token = token.to_string();
    let decided = nodes
        .decide(
            &scripts::RAISE_FENCE,
            &[fence_key],
            &[token.as_str()],
            Result::is_ok,
        )
        .await;
    // Raising is idempotent: the slower nodes' counters may as well catch up.
    decided.stragglers.finish_in_background();
    let replies = decided.replies;
    let raised = replies.iter().flatten().filter(|r| r.is_ok()).count();
    if nodes.quorum().reached(raised) {
        Ok(())
    } else {
        Err(replies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_max_and_raise_only_without_majority_agreement() {
        let q = Quorum::of(5);
        assert_eq!(token_from_grants(&[7, 7, 7], q), Some((7, false)));
        assert_eq!(token_from_grants(&[7, 9, 7], q), Some((9, true)));
        assert_eq!(token_from_grants(&[9, 9, 7, 9], q), Some((9, false)));
        assert_eq!(token_from_grants(&[4], Quorum::of(1)), Some((4, false)));
        assert_eq!(token_from_grants(&[], q), None);
    }
}

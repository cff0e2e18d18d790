//! Reading the reply of a compare-and-act script (release, extend, the
//! watchdog's renewal): done, held by another owner, or missing.

use crate::error::NodeOutcome;
use crate::node::{Reply, as_i64};

/// One node's answer to a compare-and-act script (release, extend).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompareAndAct {
    Done,
    HeldByOther,
    Missing,
}

/// Reads the reply of a compare-and-act script (1 done, 0 other owner, -1 missing).
pub(crate) fn compare_and_act(reply: &Reply) -> Option<CompareAndAct> {
    reply.as_ref().ok().and_then(read_compare_and_act)
}

pub(crate) fn read_compare_and_act(value: &redis::Value) -> Option<CompareAndAct> {
    match as_i64(value) {
        Some(1) => Some(CompareAndAct::Done),
        Some(0) => Some(CompareAndAct::HeldByOther),
        Some(-1) => Some(CompareAndAct::Missing),
        _ => None,
    }
}

/// The node outcome a compare-and-act reply stands for.
pub(crate) fn describe_compare_and_act(value: &redis::Value) -> NodeOutcome {
    match read_compare_and_act(value) {
        Some(CompareAndAct::Done) => NodeOutcome::Ok,
        Some(CompareAndAct::HeldByOther) => NodeOutcome::HeldByOther,
        Some(CompareAndAct::Missing) => NodeOutcome::Missing,
        None => NodeOutcome::unexpected_reply(value),
    }
}

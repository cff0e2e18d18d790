//! A lock's queue of waiters as the client sees it (docs/protocol.md §4.9):
//! entering it with an attempt, what a refusal says of a waiter's place,
//! how long to pause before the next attempt, and leaving it.
//!
//! Each node keeps its own queue. A waiter's *ticket* orders it there; the
//! client carries the largest ticket any node gave it into its next
//! attempts, so every node ends up ordering the same waiters the same way
//! and a release on each node hands the lock to the same waiter.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use redis::Value;
use tokio::task::JoinHandle;

use crate::keys::{LockKeys, ReaderKeys, SemaphoreKeys, WaiterKeys};
use crate::linger::RESERVED;
use crate::node::{Reply, as_i64};
use crate::node_set::NodeSet;
use crate::scripts::{self, LuaScript};
use crate::token::LockToken;

/// How long a waiter's entry in a queue lives unless refreshed: a waiter
/// that dies, freezes or gives up is out of every queue within this.
pub(crate) const WAITER_LEASE: Duration = Duration::from_secs(1);

/// The longest a waiter pauses between attempts, each of which refreshes
/// its entry: a third of the lease, so one late refresh does not drop it.
pub(crate) const REFRESH_EVERY: Duration = Duration::from_millis(333);

/// What an attempt asks of the queue: the last four arguments of ACQUIRE.
pub(crate) struct Entry<'a> {
    /// The waiter id, or `None` for an attempt that will not wait.
    pub(crate) waiter: Option<&'a str>,
    /// The largest ticket the waiter was given so far (0 at first).
    pub(crate) ticket: u64,
    /// Take the lock only in queue order, never ahead of an earlier waiter.
    pub(crate) fair: bool,
    /// The key to ask for first, where the claim has a choice (a
    /// semaphore's permit that nodes reserved for this waiter).
    pub(crate) prefer: Option<String>,
    /// The first attempt of an acquire that takes back its client's
    /// lingering release ([`crate::linger`]): the lock key is reserved for
    /// this waiter.
    pub(crate) retake: bool,
}

impl Entry<'_> {
    /// ACQUIRE's ARGV after the token and ttl.
    pub(crate) fn args(&self) -> [String; 4] {
        [
            self.waiter.unwrap_or_default().to_owned(),
            self.ticket.to_string(),
            WAITER_LEASE.as_millis().to_string(),
            if self.fair { "1" } else { "0" }.to_owned(),
        ]
    }
}

/// One node's refusal: `{0, retry_in_ms, ticket, position}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// When what blocks the lock (the holder's key, a hand-off reserved for
    /// another waiter, or in fair mode the first waiter's lease) may end;
    /// `None` for a key without expiry.
    pub(crate) retry_in: Option<Duration>,
    /// The waiter's ticket there (0: not queued).
    pub(crate) ticket: u64,
    /// The waiter's position there (0 first), `None` when not queued.
    pub(crate) position: Option<u64>,
}

impl Refusal {
    /// Reads an ACQUIRE reply; `None` for a grant or anything else.
    pub(crate) fn read(value: &Value) -> Option<Refusal> {
        let Value::Array(items) = value else {
            return None;
        };
        let [first, retry_in, ticket, position] = items.as_slice() else {
            return None;
        };
        if as_i64(first)? != 0 {
            return None;
        }
        let retry_in = as_i64(retry_in)?;
        Some(Refusal {
            retry_in: u64::try_from(retry_in).ok().map(Duration::from_millis),
            ticket: u64::try_from(as_i64(ticket)?).ok()?,
            position: u64::try_from(as_i64(position)?).ok(),
        })
    }
}

/// What the refusing nodes of one attempt said of the waiter's place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Place {
    /// The largest ticket any node gave: the waiter's ticket from now on.
    pub(crate) ticket: u64,
    /// Nodes gave different tickets: the next attempt evens them out.
    pub(crate) tickets_differ: bool,
    /// The waiter's best position on any node.
    pub(crate) position: Option<u64>,
    /// The soonest that what blocks the lock may end on any node.
    pub(crate) retry_in: Option<Duration>,
    /// Bit `i` set: node `i` has the waiter in its queue.
    pub(crate) queued: u128,
    /// Bit `i` set: node `i` failed, and may have queued it.
    pub(crate) failed: u128,
    /// Bit `i` set: node `i` had not answered when the attempt was decided.
    pub(crate) pending: u128,
}

impl Place {
    /// Reads every node's reply to one attempt.
    pub(crate) fn from_replies(replies: &[Option<Reply>]) -> Place {
        let mut place = Place::default();
        let mut tickets = Vec::new();
        for (i, reply) in replies.iter().enumerate().take(128) {
            let value = match reply {
                Some(Ok(value)) => value,
                Some(Err(_)) => {
                    place.failed |= 1 << i;
                    continue;
                }
                None => {
                    place.pending |= 1 << i;
                    continue;
                }
            };
            let Some(refusal) = Refusal::read(value) else {
                continue;
            };
            if refusal.position.is_some() {
                place.queued |= 1 << i;
                tickets.push(refusal.ticket);
            }
            place.position = min_some(place.position, refusal.position);
            place.retry_in = min_some(place.retry_in, refusal.retry_in);
        }
        place.ticket = tickets.iter().copied().max().unwrap_or(0);
        place.tickets_differ = tickets.iter().any(|t| *t != place.ticket);
        place
    }

    /// The pause before the next attempt of a waiter that push wake-ups
    /// reach: the first two in line come back when the blocking key may
    /// expire (so a holder that died hands on without a release, and the
    /// second covers a first that froze), if that comes within two thirds
    /// of the waiter lease; everyone else refreshes its entry within
    /// [`REFRESH_EVERY`], jittered so waiters do not refresh in step.
    pub(crate) fn pause(&self) -> Duration {
        let at_expiry = self.retry_in.map(|retry_in| retry_in + Duration::from_millis(1));
        match (self.position, at_expiry) {
            (Some(0 | 1), Some(at_expiry)) if at_expiry <= REFRESH_EVERY * 2 => at_expiry,
            _ => REFRESH_EVERY.mul_f64(rand::rng().random_range(0.5..=1.0)),
        }
    }
}

fn min_some<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Whether a release hands the lock to the next waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release<'a> {
    /// A holder lets go: the first waiter still listening gets it.
    HandOff,
    /// A failed attempt is undone: the key goes, nobody is woken. On a
    /// minority of nodes a hand-off would only wake a waiter that cannot
    /// win either, whose own undo would wake the next, and so on.
    Undo,
    /// A holder lets go of a contended lock it may take back at once
    /// ([`crate::linger`]): the key is reserved for the holder's next
    /// acquire, the waiter `keep_for`, for [`RESERVED`], and nobody is
    /// woken unless the holder does not come back.
    Linger { keep_for: &'a str },
}

/// The ARGV of RELEASE and READ_RELEASE for `token` (docs/protocol.md §3.2).
pub(crate) fn release_args(nodes: &NodeSet, token: &LockToken, release: Release<'_>) -> Vec<String> {
    let handoff = nodes.handoff();
    let (window_ms, keep_for) = match release {
        Release::HandOff => (handoff.window_ms(), ""),
        Release::Undo => ("0".to_owned(), ""),
        Release::Linger { keep_for } => (RESERVED.as_millis().to_string(), keep_for),
    };
    let mut args = vec![token.as_str().to_owned(), window_ms, handoff.counted.to_owned()];
    if !keep_for.is_empty() {
        args.push(keep_for.to_owned());
    }
    args
}

/// The release script of the lock on `lock_key` and its KEYS: RELEASE,
/// handing on from `waiters`, or for a reader READ_RELEASE.
pub(crate) fn release_keys(
    lock_key: &str,
    waiters: &WaiterKeys,
    reader: Option<&ReaderKeys>,
) -> (&'static LuaScript, Vec<String>) {
    let (queue, leases) = (waiters.queue.clone(), waiters.leases.clone());
    match reader {
        Some(reader) => (
            &scripts::READ_RELEASE,
            vec![
                lock_key.to_owned(),
                reader.write.clone(),
                queue,
                leases,
                reader.readers.clone(),
            ],
        ),
        None => (&scripts::RELEASE, vec![lock_key.to_owned(), queue, leases]),
    }
}

/// Releases `token`'s key with `script` (RELEASE or READ_RELEASE) and its
/// `keys` on the nodes `only` selects, in the background, waiting up to
/// `patience` for a node's connection.
#[allow(clippy::too_many_arguments)]
pub(crate) fn release_in_background(
    nodes: &Arc<NodeSet>,
    script: &'static LuaScript,
    keys: Vec<String>,
    token: &LockToken,
    release: Release<'_>,
    patience: Duration,
    only: impl Fn(usize) -> bool + Send + Sync + 'static,
) {
    let args = release_args(nodes, token, release);
    nodes.everywhere_in_background(script, keys, args, patience, only);
}

/// How a waiter leaves a queue: LEAVE on a lock, SEM_LEAVE on a semaphore
/// (either passes on a hand-off reserved for it).
#[derive(Clone)]
pub(crate) struct Leave {
    script: &'static LuaScript,
    /// The script's KEYS; its ARGV are the waiter id and the hand-off window.
    keys: Arc<[String]>,
}

impl Leave {
    /// LEAVE for the lock whose keys are `keys`.
    pub(crate) fn lock(keys: &LockKeys) -> Self {
        let waiters = keys.waiters();
        Leave {
            script: &scripts::LEAVE,
            keys: [
                keys.lock().to_owned(),
                waiters.queue.clone(),
                waiters.leases.clone(),
            ]
            .into(),
        }
    }

    /// SEM_LEAVE for the semaphore whose keys are `keys`.
    pub(crate) fn semaphore(keys: &SemaphoreKeys) -> Self {
        let waiters = keys.waiters();
        let mut all = vec![waiters.queue.clone(), waiters.leases.clone()];
        all.extend(keys.slots().iter().cloned());
        Leave {
            script: &scripts::SEM_LEAVE,
            keys: all.into(),
        }
    }

    /// Takes `waiter` out of the queue on the nodes `only` selects, in the
    /// background. Returns the task, for a caller that waits for it.
    pub(crate) fn in_background(
        &self,
        nodes: &Arc<NodeSet>,
        waiter: &str,
        only: impl Fn(usize) -> bool + Send + Sync + 'static,
    ) -> Option<JoinHandle<()>> {
        let handoff = nodes.handoff();
        let args = vec![waiter.to_owned(), handoff.window_ms(), handoff.counted.to_owned()];
        let patience = nodes.request_timeout();
        nodes.everywhere_in_background(self.script, self.keys.to_vec(), args, patience, only)
    }

    /// For the acquire requests still on their way (the nodes `pending`
    /// selects) when `waiter` was granted: each node that queues it after
    /// all (it refused, or failed and may have) is left. So is every node
    /// whose answer never comes because the holder let go first and stopped
    /// waiting for it ([`crate::lock`]): what was sent there runs ahead of
    /// the leave on the node's connection. A waiter left behind would sit
    /// first in that node's line, handed every release there until its
    /// lease ran out. Nodes that answered in time are the
    /// [`crate::waiter::Waiter`]'s to leave.
    pub(crate) fn where_late_refused(
        self,
        nodes: Arc<NodeSet>,
        waiter: String,
        pending: u128,
    ) -> impl FnMut((usize, Reply)) + Send + 'static {
        let mut late = LateNodes {
            leave: self,
            nodes,
            waiter,
            unanswered: pending,
        };
        move |(i, reply)| late.answered(i, &reply)
    }
}

/// The nodes of a granted waiter's attempt that had not answered when it
/// was decided; dropped (the replies are no longer awaited), it leaves
/// those that still have not.
struct LateNodes {
    leave: Leave,
    nodes: Arc<NodeSet>,
    waiter: String,
    /// Bit `i` set: node `i` has not answered yet.
    unanswered: u128,
}

impl LateNodes {
    fn answered(&mut self, i: usize, reply: &Reply) {
        if i < 128 {
            self.unanswered &= !(1 << i);
        }
        let queued = match reply {
            Ok(value) => Refusal::read(value).is_some_and(|refusal| refusal.position.is_some()),
            Err(_) => true,
        };
        if queued {
            self.leave
                .in_background(&self.nodes, &self.waiter, move |j| j == i);
        }
    }
}

impl Drop for LateNodes {
    fn drop(&mut self) {
        let unanswered = self.unanswered;
        if unanswered != 0 {
            let only = move |j: usize| j < 128 && unanswered & (1 << j) != 0;
            self.leave.in_background(&self.nodes, &self.waiter, only);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(retry_in: i64, ticket: i64, position: i64) -> Option<Reply> {
        Some(Ok(Value::Array(vec![
            Value::Int(0),
            Value::Int(retry_in),
            Value::Int(ticket),
            Value::Int(position),
        ])))
    }

    #[test]
    fn a_place_takes_the_largest_ticket_and_the_best_position() {
        let place = Place::from_replies(&[
            refusal(40, 3, 2),
            Some(Ok(Value::Int(7))),
            refusal(25, 5, 0),
            None,
        ]);
        assert_eq!(place.ticket, 5);
        assert!(place.tickets_differ);
        assert_eq!(place.position, Some(0));
        assert_eq!(place.retry_in, Some(Duration::from_millis(25)));
        assert_eq!(place.queued, 0b101);
        assert_eq!(
            place.pending, 0b1000,
            "a node that did not answer may still queue it"
        );
    }

    #[test]
    fn an_unqueued_refusal_counts_no_ticket() {
        let place = Place::from_replies(&[refusal(-1, 0, -1)]);
        assert_eq!(place, Place::default());
        assert!(
            Refusal::read(&Value::Int(0)).is_none(),
            "a grant or a bare 0 is no refusal"
        );
    }

    #[test]
    fn the_first_in_line_comes_back_at_expiry_and_the_rest_refresh() {
        let first = Place {
            position: Some(0),
            retry_in: Some(Duration::from_millis(20)),
            ..Place::default()
        };
        assert_eq!(first.pause(), Duration::from_millis(21));
        let far = Place {
            position: Some(5),
            ..first
        };
        assert!(far.pause() >= REFRESH_EVERY / 2 && far.pause() <= REFRESH_EVERY);
        let soon = Place {
            retry_in: Some(REFRESH_EVERY * 2 - Duration::from_millis(1)),
            ..first
        };
        assert_eq!(soon.pause(), REFRESH_EVERY * 2, "within two thirds of the lease");
        let long = Place {
            retry_in: Some(Duration::from_secs(30)),
            ..first
        };
        assert!(long.pause() <= REFRESH_EVERY);
    }
}

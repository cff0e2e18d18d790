//! Push wake-ups: one subscriber connection per node and client, routing
//! each wake-up to the `acquire` it names (docs/protocol.md §4.9).
//!
//! A release hands the lock to the first waiter in the resource's queue
//! that is still listening, and publishes that waiter's id on its client's
//! channel `<prefix>wake:<client id>`. The client subscribes to its channel
//! on every node when it first waits, not before: a client that never waits
//! opens no extra connection. Wake-ups are hints. A waiter also retries on
//! its own (see [`crate::queue`]), so a lost message or a subscriber that is
//! reconnecting costs one bounded pause, never a hang.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio::task::AbortHandle;

use crate::error::Result;
use crate::node_set::NodeSet;
use crate::queue::{Leave, WAITER_LEASE};
use crate::token::LockToken;

/// The pause before a subscriber that lost its connection (or could not
/// open one) tries again.
const RESUBSCRIBE_PAUSE: Duration = Duration::from_millis(100);

/// A client's wake-up service: its id, its channel, and who waits.
pub(crate) struct Wakeups {
    /// 32 hex digits from the CSPRNG; the first part of every waiter id.
    client_id: String,
    /// `<prefix>wake:<client id>`.
    channel: String,
    registry: Arc<Registry>,
    nodes: Arc<NodeSet>,
    /// The subscriber tasks, one per node, once the client first waits.
    listeners: OnceLock<Vec<AbortHandle>>,
}

/// The waiting `acquire` calls of one client, by sequence number.
struct Registry {
    next: AtomicU64,
    waiting: Mutex<HashMap<u64, Arc<WakeSlot>>>,
    /// Waiters that stopped waiting while some node may still queue them,
    /// oldest first: a wake-up for one may mean that its leave has not
    /// reached that node (see [`Subscriber::leave_again`]).
    departed: Mutex<VecDeque<Departed>>,
    /// How many nodes must have handed a waiter the lock before it tries:
    /// the quorum (a try on fewer reservations than that cannot succeed).
    quorum: usize,
    /// Whether node `i`'s subscriber is listening now.
    listening: Vec<AtomicBool>,
    /// Told when a subscriber starts listening, so a waiter that polls
    /// for want of it can queue up for wake-ups at once.
    started_listening: Notify,
}

/// A waiter that stopped waiting: how it leaves, and until when a node may
/// still queue it.
struct Departed {
    seq: u64,
    leave: Leave,
    until: Instant,
}

/// Where the wake-ups of one waiter land.
#[derive(Default)]
struct WakeSlot {
    /// Told once a quorum of nodes handed this waiter the same key.
    notify: Notify,
    /// Set with that notification; cleared by each attempt.
    ready: AtomicBool,
    /// Told at every hand-off, a quorum or not.
    any: Notify,
    /// The hand-offs since the last attempt: which node, and the key it
    /// named (a lock's own key; for a semaphore, which permit).
    handed: Mutex<Vec<(usize, String)>>,
}

impl WakeSlot {
    /// Records that node `index` handed this waiter `key`; true once a
    /// quorum of nodes handed it the same key (a try on fewer, or on
    /// different permits, cannot win).
    fn handed_by(&self, index: usize, key: &str, quorum: usize) -> bool {
        let mut handed = lock(&self.handed);
        if !handed.iter().any(|(i, k)| *i == index && k == key) {
            handed.push((index, key.to_owned()));
        }
        let ready = handed.iter().filter(|(_, k)| k == key).count() >= quorum;
        if ready {
            self.ready.store(true, Ordering::Release);
        }
        ready
    }
}

/// One `acquire` call's place in the wake-up routing. Dropping it stops
/// the routing (a later message for it is for a waiter that left:
/// [`Registration::departing`]).
pub(crate) struct Registration {
    seq: u64,
    /// `<client id>:<seq>`, the member of the queues.
    pub(crate) id: String,
    slot: Arc<WakeSlot>,
    registry: Arc<Registry>,
}

impl Registration {
    /// Forgets the hand-offs so far: an attempt is going out, and only
    /// those that come after it count towards waking it again.
    pub(crate) fn attempting(&self) {
        lock(&self.slot.handed).clear();
        self.slot.ready.store(false, Ordering::Release);
    }

    /// The key most of the hand-offs since the last attempt named: the
    /// permit a semaphore's waiter should ask for first, so that the nodes
    /// that reserved it for this waiter agree.
    pub(crate) fn most_named(&self) -> Option<String> {
        let handed = lock(&self.slot.handed);
        let count = |key: &String| handed.iter().filter(|(_, k)| k == key).count();
        handed
            .iter()
            .map(|(_, key)| key)
            .max_by_key(|key| count(key))
            .cloned()
    }

    /// Resolves once a quorum of nodes handed this waiter the lock (at
    /// once if they did since the last [`Registration::attempting`]).
    pub(crate) async fn handed_over(&self) {
        loop {
            self.slot.notify.notified().await;
            // A permit stored before the last attempt is stale: check.
            if self.slot.ready.load(Ordering::Acquire) {
                return;
            }
        }
    }

    /// Records that this waiter stops waiting and leaves with `leave`, and
    /// routes later wake-ups for it there: nothing awaits this registration
    /// any more. A node that its leave does not reach keeps it queued until
    /// its lease runs out and hands it every release there meanwhile; a
    /// wake-up for it until then sends that node the leave again.
    pub(crate) fn departing(&self, leave: &Leave) {
        let now = Instant::now();
        {
            let mut departed = lock(&self.registry.departed);
            while departed.front().is_some_and(|oldest| oldest.until <= now) {
                departed.pop_front();
            }
            departed.push_back(Departed {
                seq: self.seq,
                leave: leave.clone(),
                // Its lease ran from its last attempt, before now; the margin
                // covers a wake-up published just before the lease ended and
                // delivered late.
                until: now + WAITER_LEASE * 2,
            });
        }
        // Only now: a wake-up routed in between finds one or the other.
        lock(&self.registry.waiting).remove(&self.seq);
    }

    /// Resolves once any node handed this waiter the lock since the last
    /// [`Registration::attempting`] (at once if one did).
    pub(crate) async fn handed_any(&self) {
        loop {
            self.slot.any.notified().await;
            // A permit stored before the last attempt is stale: check.
            if !lock(&self.slot.handed).is_empty() {
                return;
            }
        }
    }
}

#[cfg(test)]
impl Registration {
    /// A registration of its own, outside any client (unit tests).
    pub(crate) fn detached(seq: u64) -> Self {
        let registry = Arc::new(Registry {
            next: AtomicU64::new(seq + 1),
            waiting: Mutex::default(),
            departed: Mutex::default(),
            quorum: 1,
            listening: Vec::new(),
            started_listening: Notify::new(),
        });
        Registration {
            seq,
            id: format!("{:032x}:{seq}", 0),
            slot: Arc::default(),
            registry,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.registry.waiting).remove(&self.seq);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The maps hold plain data: a panic elsewhere cannot leave them half-written.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Wakeups {
    pub(crate) fn new(nodes: Arc<NodeSet>, key_prefix: &str) -> Result<Self> {
        let client_id = LockToken::generate()?.as_str().to_owned();
        let registry = Arc::new(Registry {
            next: AtomicU64::new(1),
            waiting: Mutex::default(),
            departed: Mutex::default(),
            quorum: nodes.quorum().needed(),
            listening: nodes.nodes().iter().map(|_| AtomicBool::new(false)).collect(),
            started_listening: Notify::new(),
        });
        Ok(Wakeups {
            channel: format!("{key_prefix}wake:{client_id}"),
            client_id,
            registry,
            nodes,
            listeners: OnceLock::new(),
        })
    }

    /// A new waiter id with its own wake-up. Cheap: an `acquire` that is
    /// granted at once never needs more.
    pub(crate) fn register(&self) -> Registration {
        let seq = self.registry.next.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(WakeSlot::default());
        lock(&self.registry.waiting).insert(seq, slot.clone());
        Registration {
            seq,
            id: format!("{}:{seq}", self.client_id),
            slot,
            registry: self.registry.clone(),
        }
    }

    /// Whether enough nodes' subscribers listen for a quorum of them to be
    /// able to wake a waiter; otherwise waiters poll.
    pub(crate) fn listening(&self) -> bool {
        let up = self
            .registry
            .listening
            .iter()
            .filter(|up| up.load(Ordering::Acquire))
            .count();
        self.nodes.quorum().reached(up)
    }

    /// Resolves when a subscriber starts listening (after this call: enable
    /// it before looking at [`Wakeups::listening`], or a subscriber that
    /// starts in between is missed).
    pub(crate) fn started_listening(&self) -> Notified<'_> {
        self.registry.started_listening.notified()
    }

    /// Starts one subscriber per node on the internal runtime, once: when
    /// a waiter is first refused, so a client that never waits opens no
    /// extra connection.
    pub(crate) fn listen(&self) {
        self.listeners.get_or_init(|| {
            let Ok(runtime) = crate::runtime::handle() else {
                return Vec::new();
            };
            (0..self.nodes.nodes().len())
                .map(|index| {
                    let subscriber = Subscriber {
                        index,
                        client_id: self.client_id.clone(),
                        channel: self.channel.clone(),
                        registry: self.registry.clone(),
                        nodes: self.nodes.clone(),
                    };
                    runtime.spawn(subscriber.run()).abort_handle()
                })
                .collect()
        });
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        for listener in self.listeners.get().into_iter().flatten() {
            listener.abort();
        }
    }
}

/// The subscriber of one node: subscribes, routes messages, and subscribes
/// again after its connection ends.
struct Subscriber {
    index: usize,
    client_id: String,
    channel: String,
    registry: Arc<Registry>,
    nodes: Arc<NodeSet>,
}

impl Subscriber {
    async fn run(self) {
        let node = &self.nodes.nodes()[self.index];
        loop {
            match node.subscribe(&self.channel).await {
                Ok(mut messages) => {
                    self.registry.listening[self.index].store(true, Ordering::Release);
                    self.registry.started_listening.notify_waiters();
                    tracing::debug!(node = %node.endpoint(), "listening for wake-ups");
                    while let Some(message) = messages.next().await {
                        self.route(&message);
                    }
                    self.registry.listening[self.index].store(false, Ordering::Release);
                    tracing::debug!(node = %node.endpoint(), "wake-up subscription ended; waiters poll until it is back");
                }
                Err(failure) => {
                    tracing::debug!(node = %node.endpoint(), error = %failure, "could not subscribe to wake-ups");
                }
            }
            tokio::time::sleep(RESUBSCRIBE_PAUSE).await;
        }
    }

    /// Wakes the `acquire` a message names (`<waiter id> <lock key>`). A
    /// waiter that no longer waits left every queue that may still hold it
    /// when it stopped ([`crate::waiter`]), and that leave passes on a
    /// hand-off reserved for it; a message for it is the node's word that
    /// the leave may not have reached it ([`Subscriber::leave_again`]).
    fn route(&self, payload: &[u8]) {
        let Some((waiter, key)) = std::str::from_utf8(payload)
            .ok()
            .map(|text| text.split_once(' ').unwrap_or((text, "")))
        else {
            return;
        };
        let Some(seq) = waiter
            .strip_prefix(self.client_id.as_str())
            .and_then(|rest| rest.strip_prefix(':'))
            .and_then(|seq| seq.parse::<u64>().ok())
        else {
            return;
        };
        let Some(slot) = lock(&self.registry.waiting).get(&seq).cloned() else {
            self.leave_again(seq, waiter);
            return;
        };
        if slot.handed_by(self.index, key, self.registry.quorum) {
            slot.notify.notify_one();
        }
        slot.any.notify_one();
    }

    /// A node woke a waiter that stopped waiting. Either the wake-up was
    /// on its way when the waiter left (and its leave passed the hand-off
    /// on), or the leave never reached this node (its connection was being
    /// made again): then the node keeps the waiter first in line, reserves
    /// each release for it, unused, for a hand-off window, and the waiters
    /// behind it come back only at their next refresh. So the leave goes to
    /// this node again; in the first case it finds nothing to do.
    fn leave_again(&self, seq: u64, waiter: &str) {
        let now = Instant::now();
        let leave = lock(&self.registry.departed)
            .iter()
            .find(|departed| departed.seq == seq && departed.until > now)
            .map(|departed| departed.leave.clone());
        if let Some(leave) = leave {
            let index = self.index;
            tracing::debug!(node = %self.nodes.nodes()[index].endpoint(), waiter, "woken after it left; leaving that node again");
            leave.in_background(&self.nodes, waiter, move |i| i == index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A waiter tries once a quorum of nodes handed it the same key: two
    /// nodes reserving different permits of a semaphore for it are no
    /// quorum on either, and the key most of them named goes first.
    #[test]
    fn a_quorum_counts_hand_offs_of_one_key() {
        let slot = WakeSlot::default();
        assert!(!slot.handed_by(0, "p{s}:sem:1", 2));
        assert!(
            !slot.handed_by(1, "p{s}:sem:2", 2),
            "different permits are no quorum"
        );
        assert!(!slot.handed_by(0, "p{s}:sem:1", 2), "the same node twice is one");
        assert!(slot.handed_by(2, "p{s}:sem:2", 2));
        assert!(slot.ready.load(Ordering::Acquire));
    }
}

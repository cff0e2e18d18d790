//! One `acquire` call's time in a lock's queues: its id and wake-up, the
//! ticket it carries from attempt to attempt, the pause between attempts,
//! and leaving the queues when it stops waiting (docs/protocol.md §4.9).

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::task::JoinHandle;

use crate::queue::{Entry, Leave, Place, REFRESH_EVERY};
use crate::shared::ClientShared;
use crate::wake::Registration;

/// How long a waiter that some nodes handed the lock, but fewer than a
/// quorum, waits for the others' hand-offs before it tries anyway. Nodes
/// whose queues differ (a waiter entered or left some of them late) hand
/// one release to different waiters, none of which can then win on its
/// reservations alone; sleeping on, each would leave the lock reserved and
/// unused for the whole hand-off window. The rest of one release's
/// hand-offs arrive within about a round trip of the first; the grace
/// leaves room for a loaded machine, far within the window, and a try made
/// too soon comes back as after a split vote (see [`split_pause`]).
const SPLIT_HAND_OFF_GRACE: Duration = Duration::from_millis(20);

/// A waiting `acquire`. Dropped (granted, gave up, failed or cancelled),
/// it leaves every queue it may still be in, in the background.
pub(crate) struct Waiter {
    registration: Registration,
    client: Arc<ClientShared>,
    leave: Leave,
    place: Place,
    /// Bit `i` set: node `i` may have this waiter in its queue.
    entered: u128,
    /// The last pause was none, to even out unequal tickets at once (done
    /// once in a row, so it cannot spin).
    evening: bool,
    /// Attempts in a row that fewer than a quorum of nodes refused (see
    /// [`Waiter::pause`]).
    split: u32,
    /// The key the wake-ups before this attempt named most.
    prefer: Option<String>,
    /// Whether attempts carry the waiter's id, and so enter the queues:
    /// from the first attempt made while wake-ups can reach it on. Before
    /// that a release would find it not listening, drop it from the queue
    /// and serve a later arrival (protocol.md §4.9), so a client's first
    /// wait asks without queuing until its subscriptions are up.
    queuing: bool,
    /// Counted in the `waiting` gauge: from the first refusal on, so an
    /// acquire granted at once (a re-take among them) never shows as waiting.
    counted: bool,
    /// The last sleep ended on hand-offs from too few nodes (see
    /// [`SPLIT_HAND_OFF_GRACE`]).
    split_hand_off: bool,
}

impl Waiter {
    pub(crate) fn new(client: &Arc<ClientShared>, leave: Leave) -> Self {
        Waiter::registered(client, leave, client.wakeups.register(), false)
    }

    /// A waiter with the id a lingering release of this client reserved
    /// the key for ([`crate::linger`]): its attempts carry that id from the
    /// first, so the first takes the key back.
    pub(crate) fn adopting(client: &Arc<ClientShared>, leave: Leave, reserved: Registration) -> Self {
        Waiter::registered(client, leave, reserved, true)
    }

    fn registered(
        client: &Arc<ClientShared>,
        leave: Leave,
        registration: Registration,
        queuing: bool,
    ) -> Self {
        Waiter {
            registration,
            client: client.clone(),
            leave,
            place: Place::default(),
            entered: 0,
            evening: false,
            split: 0,
            prefer: None,
            queuing,
            counted: false,
            split_hand_off: false,
        }
    }

    /// What the next attempt asks of the queue.
    pub(crate) fn entry(&self, fair: bool) -> Entry<'_> {
        Entry {
            waiter: self.queuing.then_some(self.registration.id.as_str()),
            ticket: self.place.ticket,
            fair,
            prefer: self.prefer.clone(),
            retake: false,
        }
    }

    /// An attempt is about to go out: until its replies say otherwise, any
    /// node may queue this waiter, once it queues at all (and a cancelled
    /// attempt leaves them all).
    pub(crate) fn attempting(&mut self) {
        self.queuing = self.queuing || self.client.wakeups.listening();
        let nodes = self.client.nodes.nodes().len().min(128);
        self.entered = if self.queuing {
            u128::MAX >> (128 - nodes)
        } else {
            0
        };
        self.prefer = self.registration.most_named();
        self.registration.attempting();
    }

    /// Takes in what a refused attempt's nodes said.
    pub(crate) fn refused(&mut self, place: Place) {
        if !self.counted {
            self.counted = true;
            self.client.metrics.waiting(1);
        }
        self.client.wakeups.listen();
        if self.queuing {
            self.entered = place.queued | place.failed | place.pending;
        }
        self.place = Place {
            // At least 1 from now on: ticket 0 tells a node this waiter
            // never asked to enter its queue, and a node whose reply was
            // lost may have entered it.
            ticket: place.ticket.max(self.place.ticket).max(1),
            ..place
        };
    }

    /// The lock was granted: the nodes that granted took this waiter out of
    /// their queue, and those still on their way are left as they answer
    /// ([`crate::queue::leave_where_late_refused`]); the rest may queue it.
    pub(crate) fn granted(&mut self, place: &Place) {
        if self.queuing {
            self.entered = place.queued | place.failed;
        }
    }

    /// How long to pause before the next attempt, or `None` to fall back
    /// to the client's retry policy (no wake-up can reach this waiter: its
    /// subscriptions are not up, or no node queued it).
    pub(crate) fn pause(&mut self) -> Option<Duration> {
        if self.place.queued == 0 || !self.client.wakeups.listening() {
            return None;
        }
        self.evening = self.place.tickets_differ && !self.evening;
        if self.evening {
            return Some(Duration::ZERO);
        }
        let refusals = self.place.queued.count_ones() as usize;
        // A try on a release split between waiters is refused by the nodes
        // that reserved the lock for the others, who try too: each undo
        // frees what its waiter was handed, nobody is woken, and the
        // refusals' `retry_in` is the window of reservations already gone.
        // So it comes back as after a split vote, once.
        let split_hand_off = std::mem::take(&mut self.split_hand_off);
        if self.client.nodes.quorum().reached(refusals) && !split_hand_off {
            self.split = 0;
            return Some(self.place.pause());
        }
        self.split = self.split.saturating_add(1);
        Some(split_pause(self.split))
    }

    /// Sleeps for `pause`, or until a release hands this waiter the lock
    /// (on a quorum of nodes, or, unless `fair`, on fewer and no more came
    /// within [`SPLIT_HAND_OFF_GRACE`]), or (while it polls for want of
    /// them) until wake-ups can reach it.
    pub(crate) async fn sleep(&mut self, pause: Duration, fair: bool) {
        let wakeups = &self.client.wakeups;
        let reachable = async {
            // Registered before looking, so a subscriber that starts in
            // between still ends the sleep.
            let started = wakeups.started_listening();
            tokio::pin!(started);
            started.as_mut().enable();
            if wakeups.listening() {
                std::future::pending::<()>().await;
            }
            started.await;
        };
        let handed_too_few = async {
            if fair {
                // A node that refuses a free lock in fair mode tells its own
                // first waiter, which is then first on that node alone: a
                // try of its own would be refused by the others and wake
                // their first waiters in turn (docs/performance.md).
                std::future::pending::<()>().await;
            }
            self.registration.handed_any().await;
            tokio::time::sleep(SPLIT_HAND_OFF_GRACE).await;
        };
        self.split_hand_off = tokio::select! {
            () = self.registration.handed_over() => false,
            () = handed_too_few => true,
            () = reachable => false,
            () = tokio::time::sleep(pause) => false,
        };
    }

    /// Stops waiting before `acquire` reports an error: leaves every queue
    /// it may be in and waits for the nodes to answer (for at most one
    /// per-node timeout, so that a node that is down cannot hold the error
    /// up), so that a release the caller makes next is not handed to a
    /// waiter that is gone (protocol.md §4.9). A waiter dropped otherwise
    /// (granted, or its call cancelled) leaves in the background.
    pub(crate) async fn give_up(mut self) {
        if let Some(leaving) = self.start_leaving() {
            let patience = self.client.nodes.request_timeout();
            let _ = tokio::time::timeout(patience, leaving).await;
        }
    }

    /// Sends the leave to the nodes that may queue this waiter, once.
    fn start_leaving(&mut self) -> Option<JoinHandle<()>> {
        let entered = std::mem::take(&mut self.entered);
        if entered == 0 {
            return None;
        }
        self.registration.departing(&self.leave);
        self.leave
            .in_background(&self.client.nodes, &self.registration.id, move |i| {
                i < 128 && entered & (1 << i) != 0
            })
    }
}

/// The pause after the `split`-th attempt in a row that fewer than a
/// quorum of nodes refused: the others granted (a split vote, say between
/// permits of a semaphore, or with an attempt whose grants were not undone
/// yet) or failed. What they granted is free for someone, and hand-offs from
/// the minority that queued this waiter cannot wake it, so it comes back
/// soon rather than at its next refresh: 1 ms, doubling, jittered so that
/// the waiters that split do not meet again, never above the refresh pause.
fn split_pause(split: u32) -> Duration {
    let doubled = Duration::from_millis(1) * 2u32.saturating_pow(split.saturating_sub(1).min(16));
    doubled
        .mul_f64(rand::rng().random_range(0.5..=1.5))
        .min(REFRESH_EVERY)
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.counted {
            self.client.metrics.waiting(-1);
        }
        self.start_leaving();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A split vote comes back within about a millisecond, later ones
    /// double, and none waits longer than a refresh would.
    #[test]
    fn split_pauses_start_short_double_and_stay_under_a_refresh() {
        for _ in 0..100 {
            assert!(split_pause(1) <= Duration::from_micros(1_500));
            assert!(split_pause(4) >= Duration::from_millis(4));
            assert!(split_pause(4) <= Duration::from_millis(12));
            assert!(split_pause(40) <= REFRESH_EVERY);
            assert!(split_pause(u32::MAX) <= REFRESH_EVERY);
        }
    }
}

//! Lingering releases (docs/protocol.md §4.9, "Re-takes"): the holder of a
//! contended lock who asks for it again at once takes it back before the
//! next waiter is woken, a bounded number of times in a row.
//!
//! A hand-off costs the next waiter a wake-up and a round trip before it
//! holds the lock, during which nobody does; a holder that loops (release,
//! acquire, release…) takes it back in one. So the release of a lock or
//! permit that this client had to wait for, having asked for it again right
//! after releasing it (it loops), or that it had just taken back, deletes
//! the key without a hand-off, as an undo does, and leaves a note here. A
//! grant of the same key to this client while the note is here takes it
//! over, with the count of re-takes in a row; after [`MAX_RETAKES`] the
//! release hands off, so the waiters still go in turn. A note nobody takes
//! over within [`LINGER`] (or when the client closes) is acted on: the
//! client takes the free key for a moment and releases it with a hand-off,
//! which wakes the first waiter ([`crate::acquire::hand_on`]). Should the
//! process end first, the key is already free, and the waiters come back
//! at their next refresh, as after a lost wake-up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::keys::LockKeys;
use crate::node_set::NodeSet;
use crate::runtime;

/// How long a lingering release waits for its holder to come back before
/// the lock is handed to the next waiter, and how soon after a release an
/// acquire must start for its client to count as looping: many times what
/// a loop takes between a release and its next acquire, so a busy machine
/// rarely hands on a lock its holder was about to take back, and small
/// against a hand-off's window.
pub(crate) const LINGER: Duration = Duration::from_millis(10);

/// How many release times a client keeps before it drops the stale ones.
const RELEASES_KEPT: usize = 64;

/// How many times in a row the holder of a contended lock (or permit) may
/// take it back at once before its release hands it to the next waiter
/// (docs/protocol.md §4.9, "Re-takes"): each holder served before a waiter
/// holds it for at most `MAX_RETAKES + 1` grants in a row.
pub const MAX_RETAKES: u32 = 15;

/// What a grant of a lock or permit in the default mode carries, for its
/// release.
#[derive(Clone, Debug)]
pub(crate) struct Linger {
    /// The keys of the lock or permit, to hand it on if nobody takes it back.
    pub(crate) keys: LockKeys,
    /// What its client's loops are told by: the lock's key, or the
    /// semaphore's size key for any of its permits.
    pub(crate) claim: String,
    /// `Some(n)` when its release may linger, after `n` re-takes in a row
    /// (0 after a wait).
    pub(crate) retakes: Option<u32>,
}

impl Linger {
    /// Whether this grant's release may linger rather than hand off.
    pub(crate) fn may_linger(&self) -> bool {
        self.retakes.is_some_and(|n| n < MAX_RETAKES)
    }
}

/// One lingering release.
struct Note {
    id: u64,
    /// The re-takes in a row of the grant that takes it over.
    retakes: u32,
}

/// A client's lingering releases, by lock (or permit) key, and when it
/// last released each lock or semaphore.
pub(crate) struct Lingers {
    notes: Mutex<HashMap<String, Note>>,
    released: Mutex<HashMap<String, Instant>>,
    next_id: AtomicU64,
    /// The client's closing: lingering ends at once, handing keys on.
    closing: CancellationToken,
}

impl Lingers {
    pub(crate) fn new(closing: CancellationToken) -> Arc<Self> {
        Arc::new(Lingers {
            notes: Mutex::new(HashMap::new()),
            released: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            closing,
        })
    }

    fn notes(&self) -> MutexGuard<'_, HashMap<String, Note>> {
        self.notes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn releases(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        self.released.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that this client released `claim` (a lock or a semaphore's permit) now.
    pub(crate) fn released(&self, claim: &str) {
        let now = Instant::now();
        let mut released = self.releases();
        if released.len() >= RELEASES_KEPT && !released.contains_key(claim) {
            released.retain(|_, at| now.duration_since(*at) <= LINGER);
        }
        if released.len() < RELEASES_KEPT || released.contains_key(claim) {
            released.insert(claim.to_owned(), now);
        }
    }

    /// Whether an acquire of `claim` that started at `started` came within
    /// [`LINGER`] of this client's last release of it: its client loops.
    pub(crate) fn loops(&self, claim: &str, started: Instant) -> bool {
        self.releases().get(claim).is_some_and(|at| {
            started
                .checked_duration_since(*at)
                .is_some_and(|gap| gap <= LINGER)
        })
    }

    /// Takes over this client's lingering release of `lock_key`, if there
    /// is one, for a grant of that key: its re-takes in a row.
    pub(crate) fn take_over(&self, lock_key: &str) -> Option<u32> {
        self.notes().remove(lock_key).map(|note| note.retakes)
    }

    /// The first of `lock_keys` (a semaphore's permits) whose release by
    /// this client lingers.
    pub(crate) fn noted_any(&self, lock_keys: &[String]) -> Option<String> {
        let notes = self.notes();
        if notes.is_empty() {
            return None;
        }
        lock_keys.iter().find(|key| notes.contains_key(*key)).cloned()
    }

    /// Notes a release of `linger`'s key that did not hand off; unless a
    /// grant of the key takes it over within [`LINGER`], hands the key on
    /// then, in the background (counted for `Client::settle`).
    pub(crate) fn linger(self: &Arc<Self>, nodes: &Arc<NodeSet>, patience: Duration, linger: &Linger) {
        self.released(&linger.claim);
        let Ok(runtime) = runtime::handle() else { return };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let keys = linger.keys.clone();
        let note = Note {
            id,
            retakes: linger.retakes.unwrap_or(0) + 1,
        };
        self.notes().insert(keys.lock().to_owned(), note);
        let (lingers, nodes, running) = (self.clone(), nodes.clone(), nodes.background.start());
        runtime.spawn(async move {
            let _running = running;
            tokio::select! {
                () = tokio::time::sleep(LINGER) => {}
                () = lingers.closing.cancelled() => {}
            }
            if lingers.untaken(keys.lock(), id) {
                crate::acquire::hand_on(&nodes, keys, patience).await;
            }
        });
    }

    /// Removes note `id` of `lock_key` if no grant took it over.
    fn untaken(&self, lock_key: &str, id: u64) -> bool {
        let mut notes = self.notes();
        let ours = notes.get(lock_key).is_some_and(|note| note.id == id);
        if ours {
            notes.remove(lock_key);
        }
        ours
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> LockKeys {
        LockKeys::new("t:", "res").unwrap()
    }

    fn linger(retakes: Option<u32>) -> Linger {
        Linger {
            keys: keys(),
            claim: "t:{res}".into(),
            retakes,
        }
    }

    #[test]
    fn a_grant_may_linger_until_the_retakes_run_out() {
        assert!(linger(Some(0)).may_linger());
        assert!(linger(Some(MAX_RETAKES - 1)).may_linger());
        assert!(!linger(Some(MAX_RETAKES)).may_linger());
        assert!(!linger(None).may_linger());
    }

    #[test]
    fn a_client_loops_when_it_asks_again_soon_after_its_release() {
        let lingers = Lingers::new(CancellationToken::new());
        let before = Instant::now();
        assert!(!lingers.loops("t:{res}", before), "never released");
        lingers.released("t:{res}");
        assert!(!lingers.loops("t:{res}", before), "asked before the release");
        assert!(lingers.loops("t:{res}", Instant::now()));
        assert!(
            !lingers.loops("t:{res}", Instant::now() + LINGER * 2),
            "asked long after"
        );
        assert!(!lingers.loops("t:{other}", Instant::now()));
    }

    #[test]
    fn release_times_stay_bounded() {
        let lingers = Lingers::new(CancellationToken::new());
        for i in 0..RELEASES_KEPT * 3 {
            lingers.released(&format!("t:{{{i}}}"));
        }
        assert!(lingers.releases().len() <= RELEASES_KEPT);
    }

    #[test]
    fn a_note_is_taken_over_once_and_only_by_its_key() {
        let lingers = Lingers::new(CancellationToken::new());
        lingers
            .notes()
            .insert("t:{res}".into(), Note { id: 1, retakes: 3 });
        assert_eq!(
            lingers.noted_any(&["t:{x}".into(), "t:{res}".into()]),
            Some("t:{res}".into())
        );
        assert_eq!(lingers.take_over("t:{other}"), None);
        assert!(!lingers.untaken("t:{res}", 2), "another note's timer");
        assert_eq!(lingers.take_over("t:{res}"), Some(3));
        assert_eq!(lingers.take_over("t:{res}"), None);
        assert!(!lingers.untaken("t:{res}", 1), "taken over before its timer");
    }
}

//! Lingering releases (docs/protocol.md §4.9, "Re-takes"): the holder of a
//! contended lock who asks for it again at once takes it back before the
//! next waiter is woken, a bounded number of times in a row.
//!
//! A hand-off costs the next waiter a wake-up and a round trip before it
//! holds the lock, during which nobody does; a holder that loops (release,
//! acquire, release…) takes it back in one. So the release of a lock or
//! permit that this client had to wait for, having asked for it again right
//! after releasing it (it loops), or that it had just taken back, reserves
//! the key for this client's next acquire of it instead of handing it on,
//! and leaves a note here with the reservation's waiter id. An acquire of
//! the same claim while the note is here adopts that id, and so takes the
//! key back on every node with no other attempt able to take it in between;
//! it carries the count of re-takes in a row, and after [`MAX_RETAKES`] the
//! release hands off, so the waiters still go in turn. A note nobody adopts
//! within [`LINGER`] (or when the client closes) is acted on: the
//! reservation is left as a waiter leaves, which hands the key to the first
//! waiter and wakes it. Should the process end first, the reservation runs
//! out after [`RESERVED`], and the waiters come back at their next refresh,
//! as after a lost wake-up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::claim::Claim;
use crate::keys::LockKeys;
use crate::node_set::NodeSet;
use crate::queue::Leave;
use crate::runtime;
use crate::wake::Registration;

/// How long a lingering release's reservation waits for its holder to come
/// back before the lock is handed to the next waiter, and how soon after a release an
/// acquire must start for its client to count as looping: many times what
/// a loop takes between a release and its next acquire, so a busy machine
/// rarely hands on a lock its holder was about to take back, and small
/// against a hand-off's window.
pub(crate) const LINGER: Duration = Duration::from_millis(10);

/// How long a lingering release reserves the key for its holder: time for
/// the holder to come back within [`LINGER`], or for its hand-on, and for
/// the request to reach the node. Short, because nothing else ends a
/// reservation whose hand-on overtook it on its way to a node (both wait
/// for a connection that is being made again): until it runs out, others
/// find the lock taken.
pub(crate) const RESERVED: Duration = Duration::from_millis(100);

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
    /// The waiter id the key is reserved for, with its wake-up routing.
    reserved: Registration,
}

/// A lingering release that an acquire took over: it asks with the
/// reservation's waiter id, so its first attempt takes the key back.
pub(crate) struct Adopted {
    /// The reserved key: the lock's, or the semaphore permit's to ask for first.
    pub(crate) key: String,
    /// The re-takes in a row of a grant on the first attempt.
    pub(crate) retakes: u32,
    pub(crate) reserved: Registration,
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

    /// Takes over this client's lingering release of `claim`'s key (of any
    /// of a semaphore's permits), if there is one, for an acquire of it.
    pub(crate) fn adopt(&self, claim: &Claim) -> Option<Adopted> {
        let mut notes = self.notes();
        if notes.is_empty() {
            return None;
        }
        let key = match claim {
            Claim::Lock(keys) => notes.contains_key(keys.lock()).then(|| keys.lock().to_owned()),
            Claim::Permit(keys) => keys.slots().iter().find(|key| notes.contains_key(*key)).cloned(),
            Claim::Read(_) | Claim::Write(_) => None,
        }?;
        let note = notes.remove(&key)?;
        Some(Adopted {
            key,
            retakes: note.retakes,
            reserved: note.reserved,
        })
    }

    /// Notes a release of `linger`'s key that reserved it for `reserved`;
    /// unless an acquire adopts it within [`LINGER`], leaves the reservation
    /// then, in the background (counted for `Client::settle`), which hands
    /// the key to the first waiter.
    pub(crate) fn linger(self: &Arc<Self>, nodes: &Arc<NodeSet>, linger: &Linger, reserved: Registration) {
        self.released(&linger.claim);
        let Ok(runtime) = runtime::handle() else { return };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let keys = linger.keys.clone();
        let note = Note {
            id,
            retakes: linger.retakes.unwrap_or(0) + 1,
            reserved,
        };
        self.notes().insert(keys.lock().to_owned(), note);
        let (lingers, nodes, running) = (self.clone(), nodes.clone(), nodes.background.start());
        runtime.spawn(async move {
            let _running = running;
            tokio::select! {
                () = tokio::time::sleep(LINGER) => {}
                () = lingers.closing.cancelled() => {}
            }
            if let Some(note) = lingers.untaken(keys.lock(), id) {
                Leave::lock(&keys).in_background(&nodes, &note.reserved.id, |_| true);
            }
        });
    }

    /// Removes note `id` of `lock_key` if no acquire adopted it.
    fn untaken(&self, lock_key: &str, id: u64) -> Option<Note> {
        let mut notes = self.notes();
        if notes.get(lock_key).is_some_and(|note| note.id == id) {
            return notes.remove(lock_key);
        }
        None
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
    fn a_note_is_adopted_once_and_only_by_its_claim() {
        let lingers = Lingers::new(CancellationToken::new());
        let note = |id| Note {
            id,
            retakes: 3,
            reserved: Registration::detached(id),
        };
        lingers.notes().insert("t:{res}".into(), note(1));
        let other = Claim::Lock(LockKeys::new("t:", "other").unwrap());
        assert!(lingers.adopt(&other).is_none());
        assert!(lingers.untaken("t:{res}", 2).is_none(), "another note's timer");
        let adopted = lingers.adopt(&Claim::Lock(keys())).expect("its note");
        assert_eq!((adopted.key.as_str(), adopted.retakes), ("t:{res}", 3));
        assert_eq!(adopted.reserved.id, Registration::detached(1).id);
        assert!(lingers.adopt(&Claim::Lock(keys())).is_none(), "adopted once");
        assert!(
            lingers.untaken("t:{res}", 1).is_none(),
            "adopted before its timer"
        );
        lingers.notes().insert("t:{res}".into(), note(4));
        assert!(lingers.untaken("t:{res}", 4).is_some(), "its timer, not adopted");
        assert!(lingers.adopt(&Claim::Lock(keys())).is_none());
    }
}

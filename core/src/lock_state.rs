//! A held lock's state: what the [`Lock`](crate::Lock) handle and the
//! watchdog share, its status and why it was lost.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::fenced::Fence;
use crate::keys::{HeldKeys, HeldKind, LockKeys, WaiterKeys};
use crate::lease::{Leases, Outcome};
use crate::linger::Linger;
use crate::metrics::ClientMetrics;
use crate::node_set::NodeSet;
use crate::options::{RenewalPolicy, Resolved};
use crate::queue;
use crate::scripts::LuaScript;
use crate::token::LockToken;

/// Where a lock stands.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockStatus {
    /// Held; [`Lock::remaining`](crate::Lock::remaining) says for how long without a renewal.
    Held,
    /// Released by its owner.
    Released,
    /// Lost while held; do not touch the protected resource any more.
    Lost(LossReason),
}

/// Why a lock was lost.
///
/// [`LossReason::name`] is the stable name every front shares
/// (`tests/vectors/protocol.json`, `loss_reasons`); `Display` gives the
/// sentence for messages.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum LossReason {
    /// A renewal found the key missing on a majority (deleted, evicted, or the node restarted empty).
    Deleted,
    /// A renewal found another owner's token on a majority.
    TakenOver,
    /// Renewals kept failing (nodes unreachable) until the validity ran out.
    Unreachable,
    /// The lease ran out without renewal (auto-renew off, or a renewal limit reached).
    Expired,
}

impl LossReason {
    /// Every reason.
    pub const ALL: &'static [LossReason] = <LossReason as strum::VariantArray>::VARIANTS;

    /// The stable name: `"deleted"`, `"taken_over"`, `"unreachable"` or `"expired"`.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The reason with stable name `name`, if this version knows it.
    pub fn from_name(name: &str) -> Option<LossReason> {
        name.parse().ok()
    }
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossReason::Deleted => "the lock key was deleted or expired on a majority of nodes",
            LossReason::TakenOver => "another owner holds the lock on a majority of nodes",
            LossReason::Unreachable => "renewals failed until the lock's validity ran out",
            LossReason::Expired => "the lease ran out without renewal",
        })
    }
}

/// Timing that renewals and extensions update together.
#[derive(Debug)]
pub(crate) struct Timing {
    /// The ttl renewals send: the grant's, or the last successful extend's.
    pub(crate) ttl: Duration,
    /// What each node may hold; `valid_until` follows from it.
    pub(crate) leases: Leases,
    pub(crate) valid_until: Instant,
    /// The ttl behind `valid_until`: shorter than `ttl` while a request with
    /// a shorter one may still land. Renewals fall due after a third of it.
    pub(crate) lease_ttl: Duration,
    pub(crate) renewals: u32,
    /// The lock's job in the watchdog's schedule, if any.
    pub(crate) job: Option<JobKey>,
}

impl Timing {
    /// Takes in a ttl change sent at `sent` (see [`crate::lease`]); returns
    /// whether the lock is still valid on a quorum.
    pub(crate) fn record(
        &mut self,
        nodes: &NodeSet,
        sent: Instant,
        ttl: Duration,
        outcomes: impl IntoIterator<Item = Outcome>,
    ) -> bool {
        self.leases.record(sent, ttl, outcomes);
        match nodes.validity(&self.leases) {
            Some(validity) => {
                self.valid_until = validity.until;
                self.lease_ttl = validity.ttl;
                validity.until > Instant::now()
            }
            None => {
                // Fewer than a quorum hold the key: nothing left to rely on.
                self.valid_until = self.valid_until.min(Instant::now());
                false
            }
        }
    }
}

/// What a lock handle and the watchdog share. Kept small: a client may hold
/// many thousands of locks.
pub(crate) struct LockState {
    /// `prefix{resource}` (or a semaphore's `prefix{name}:sem:<i>`); the
    /// resource is the part between the braces.
    lock_key: String,
    prefix_len: usize,
    resource_end: usize,
    /// The keys not derived from the lock key: a permit's or a read-write
    /// lock's queue, a reader's release keys.
    held: Option<Box<HeldKeys>>,
    /// A lock, a permit, a read or write grant.
    pub(crate) kind: HeldKind,
    pub(crate) token: LockToken,
    pub(crate) fencing_token: u64,
    /// This grant's id for fenced writes ([`Fence::holder`]).
    pub(crate) holder: u64,
    pub(crate) acquired_at: Instant,
    pub(crate) renewal: RenewalPolicy,
    timing: Mutex<Timing>,
    /// [`LockStatus`] encoded by [`status_code`].
    status: AtomicU8,
    /// Wakes [`Lock::lost`] waiters.
    lost: Notify,
    /// Acquire requests still on their way to the nodes that had not
    /// answered when the quorum granted the lock; release stops them.
    stragglers: Mutex<Option<JoinHandle<()>>>,
    /// One network operation (renew, extend, release) at a time, so a release
    /// never races a renewal and no PEXPIRE follows a release.
    pub(crate) busy: Arc<tokio::sync::Mutex<()>>,
    /// The client's counters: held, lost, renewals.
    pub(crate) metrics: Arc<ClientMetrics>,
    /// Set when the release may linger ([`crate::linger`]).
    pub(crate) linger: Option<Linger>,
}

fn status_code(status: LockStatus) -> u8 {
    match status {
        LockStatus::Held => 0,
        LockStatus::Released => 1,
        LockStatus::Lost(LossReason::Deleted) => 2,
        LockStatus::Lost(LossReason::TakenOver) => 3,
        LockStatus::Lost(LossReason::Unreachable) => 4,
        LockStatus::Lost(LossReason::Expired) => 5,
    }
}

fn status_from(code: u8) -> LockStatus {
    match code {
        0 => LockStatus::Held,
        1 => LockStatus::Released,
        2 => LockStatus::Lost(LossReason::Deleted),
        3 => LockStatus::Lost(LossReason::TakenOver),
        4 => LockStatus::Lost(LossReason::Unreachable),
        _ => LockStatus::Lost(LossReason::Expired),
    }
}

impl LockState {
    /// A lock just granted on `keys` with `options` (its ttl and renewal
    /// policy), counted as held in `metrics` until it is released, lost or
    /// dropped.
    pub(crate) fn new(
        keys: LockKeys,
        token: LockToken,
        fence: Fence,
        options: &Resolved,
        leases: Leases,
        valid_until: Instant,
        metrics: Arc<ClientMetrics>,
    ) -> Self {
        let (ttl, renewal) = (options.ttl, options.renewal);
        metrics.held(1);
        let (prefix_len, resource_end, kind) = (keys.prefix_len, keys.resource_end, keys.kind);
        let (lock_key, held) = keys.into_held();
        LockState {
            prefix_len,
            resource_end,
            lock_key,
            held,
            kind,
            token,
            fencing_token: fence.token,
            holder: fence.holder,
            acquired_at: Instant::now(),
            renewal,
            timing: Mutex::new(Timing {
                ttl,
                leases,
                valid_until,
                lease_ttl: ttl,
                renewals: 0,
                job: None,
            }),
            stragglers: Mutex::new(None),
            status: AtomicU8::new(status_code(LockStatus::Held)),
            lost: Notify::new(),
            busy: Arc::new(tokio::sync::Mutex::new(())),
            metrics,
            linger: None,
        }
    }

    pub(crate) fn lock_key(&self) -> &str {
        &self.lock_key
    }

    /// The KEYS of this lock's EXTEND (docs/protocol.md §3.3): its key and,
    /// for a permit, the semaphore's size key, which must live as long as
    /// any permit is held (§4.11).
    pub(crate) fn extend_keys(&self) -> ExtendKeys<'_> {
        match self.held.as_ref().and_then(|held| held.size.as_deref()) {
            Some(size) => ExtendKeys {
                keys: [&self.lock_key, size],
                len: 2,
            },
            None => ExtendKeys {
                keys: [&self.lock_key, ""],
                len: 1,
            },
        }
    }

    pub(crate) fn resource(&self) -> &str {
        &self.lock_key[self.prefix_len + 1..self.resource_end]
    }

    /// How messages name it: "lock 'orders'", "permit 2 of semaphore 'jobs'"…
    pub(crate) fn describe(&self) -> String {
        self.kind.describe(self.resource())
    }

    /// The script and KEYS of this lock's release: RELEASE with the queue
    /// it hands the lock on from, or a reader's READ_RELEASE.
    pub(crate) fn release_keys(&self) -> (&'static LuaScript, Vec<String>) {
        match &self.held {
            Some(held) => queue::release_keys(&self.lock_key, &held.waiters, held.reader.as_ref()),
            None => queue::release_keys(&self.lock_key, &WaiterKeys::of(&self.lock_key), None),
        }
    }

    /// Keeps the task that carries the grant to the slower nodes, for release to stop.
    pub(crate) fn keep_stragglers(&self, task: Option<JoinHandle<()>>) {
        *self.stragglers_slot() = task;
    }

    pub(crate) fn stragglers_slot(&self) -> MutexGuard<'_, Option<JoinHandle<()>>> {
        // A handle or none: a panic elsewhere cannot leave it half-written.
        self.stragglers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn timing(&self) -> MutexGuard<'_, Timing> {
        // The timing is plain data; a panic elsewhere cannot leave it half-written.
        self.timing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn status(&self) -> LockStatus {
        status_from(self.status.load(Ordering::Acquire))
    }

    /// Moves from `Held` to `to`; false if the lock was not held any more.
    pub(crate) fn leave_held(&self, to: LockStatus) -> bool {
        let held = status_code(LockStatus::Held);
        let left = self
            .status
            .compare_exchange(held, status_code(to), Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if left {
            self.metrics.held(-1);
        }
        left
    }

    /// Signals loss to every waiter, once.
    pub(crate) fn mark_lost(&self, reason: LossReason) {
        if self.leave_held(LockStatus::Lost(reason)) {
            self.metrics.lost(self.resource(), reason);
            self.lost.notify_waiters();
            tracing::warn!(resource = %self.resource(), %reason, "lock lost");
        }
    }

    /// Resolves when the lock is lost (never after a clean release).
    pub(crate) async fn wait_lost(&self) -> LossReason {
        loop {
            // Register before looking, so a loss between the two is not missed.
            let notified = self.lost.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let LockStatus::Lost(reason) = self.status() {
                return reason;
            }
            notified.await;
        }
    }

    pub(crate) fn is_held(&self) -> bool {
        self.status() == LockStatus::Held && Instant::now() < self.timing().valid_until
    }

    pub(crate) fn remaining(&self) -> Duration {
        if self.status() != LockStatus::Held {
            return Duration::ZERO;
        }
        self.timing()
            .valid_until
            .saturating_duration_since(Instant::now())
    }
}

/// The KEYS of a held lock's EXTEND ([`LockState::extend_keys`]), kept
/// on the stack: every renewal of every lock builds them.
pub(crate) struct ExtendKeys<'a> {
    keys: [&'a str; 2],
    len: usize,
}

impl<'a> ExtendKeys<'a> {
    pub(crate) fn list(&self) -> &[&'a str] {
        &self.keys[..self.len]
    }
}

/// Where the watchdog's next job for a lock sits in its schedule; unique
/// per job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct JobKey {
    pub(crate) due: Instant,
    pub(crate) seq: u64,
}

impl Drop for LockState {
    /// A lock dropped while held (its handle gone, never released) stops
    /// counting as held: nothing renews it any more.
    fn drop(&mut self) {
        if self.status() == LockStatus::Held {
            self.metrics.held(-1);
        }
    }
}

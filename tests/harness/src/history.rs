//! A history of lock grants on one monotonic clock, and the checkers that
//! read it (reliability.md §1.6).
//!
//! Every test that takes locks records, for each successful acquisition,
//! when the call started and returned, the validity the library reported,
//! when the holder stopped using the lock, and its fencing token. All times
//! are [`Instant`]s of this process, so intervals from many clients in one
//! process compare directly. The checkers then look for:
//!
//! - **P1** two holders whose intervals `[acquired, min(released, valid_until)]` overlap;
//! - **P2** a lock-protected counter that lost updates;
//! - **P3** a reported validity larger than the lease allows
//!   (`ttl − elapsed − (ttl·drift + 2 ms)`), or not positive;
//! - **P9** fencing tokens that do not strictly increase in grant order.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use fencelock_harness::{Grant, History};
//!
//! let history = History::new();
//! let requested = Instant::now();
//! // ... acquire returns with validity `v` and fencing token 7 ...
//! let grant = Grant::new("client-a", "res", requested, Instant::now(), Duration::from_millis(900), Duration::from_secs(1), 7);
//! let id = history.record(grant);
//! // ... critical section ...
//! history.released(id, Instant::now());
//! assert!(history.check(&Default::default()).is_empty());
//! ```

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One successful acquisition, as the client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Who held it (free text: "client 2", "pid 123").
    pub client: String,
    /// The resource.
    pub resource: String,
    /// When the acquire call started.
    pub requested_at: Instant,
    /// When the acquire call returned the lock.
    pub acquired_at: Instant,
    /// The validity the library reported right after returning (`remaining()`).
    pub validity: Duration,
    /// The ttl asked for.
    pub ttl: Duration,
    /// The fencing token.
    pub fencing_token: u64,
    /// When the holder stopped relying on the lock (called release, or
    /// stopped working); `None` while held or when it never did.
    pub released_at: Option<Instant>,
    /// The holder's latest reading of its validity after the grant (after
    /// an extend or a renewal): from the instant, for the duration. It
    /// replaces the grant's own validity as the end of the holder's lease.
    pub revalidated: Option<(Instant, Duration)>,
}

impl Grant {
    /// A grant not yet released.
    pub fn new(
        client: impl Into<String>,
        resource: impl Into<String>,
        requested_at: Instant,
        acquired_at: Instant,
        validity: Duration,
        ttl: Duration,
        fencing_token: u64,
    ) -> Grant {
        Grant {
            client: client.into(),
            resource: resource.into(),
            requested_at,
            acquired_at,
            validity,
            ttl,
            fencing_token,
            released_at: None,
            revalidated: None,
        }
    }

    /// The last instant at which the holder may act: its release, or the end
    /// of its latest reported validity if that comes first.
    pub fn valid_until(&self) -> Instant {
        let lease_end = self
            .revalidated
            .map_or(self.acquired_at + self.validity, |(at, validity)| at + validity);
        self.released_at
            .map_or(lease_end, |released| released.min(lease_end))
    }

    fn overlaps(&self, later: &Grant) -> bool {
        later.acquired_at < self.valid_until() && self.acquired_at < later.valid_until()
    }
}

/// The index of a grant in a [`History`], for [`History::released`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrantId(usize);

/// What the checkers allow; the defaults are the library's own.
#[derive(Clone, Copy, Debug)]
pub struct CheckOptions {
    /// The client's clock-drift factor (default 0.01).
    pub drift_factor: f64,
    /// The least time any acquire round trip can take under the injected
    /// faults (e.g. twice a proxy's one-way delay): the reported validity
    /// must leave at least this much out. Default zero.
    pub min_round_trip: Duration,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            drift_factor: 0.01,
            min_round_trip: Duration::ZERO,
        }
    }
}

/// A broken property, with the grants that break it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// P1: two holders at once.
    Overlap {
        /// The earlier grant.
        first: Grant,
        /// The grant that began while the first was still valid.
        second: Grant,
    },
    /// P2: a lock-protected counter lost updates (or gained some).
    Counter {
        /// What the workload should have reached.
        expected: u64,
        /// What the storage holds.
        actual: u64,
    },
    /// P3: a validity longer than the lease allows, or not positive.
    Validity {
        /// The grant.
        grant: Grant,
        /// The largest validity allowed for it.
        bound: Duration,
    },
    /// P1 for a semaphore: more holders valid at one instant than it has permits.
    Capacity {
        /// The holders valid at that instant.
        holders: Vec<Grant>,
        /// The permits.
        permits: usize,
    },
    /// P9: a later grant got a token not larger than an earlier one.
    TokenOrder {
        /// The earlier grant.
        earlier: Grant,
        /// The later grant with a token that is not larger.
        later: Grant,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Overlap { first, second } => write!(
                f,
                "P1 overlap on '{}': {} (token {}) valid {:?} past {}'s acquisition (token {})",
                first.resource,
                first.client,
                first.fencing_token,
                first.valid_until().saturating_duration_since(second.acquired_at),
                second.client,
                second.fencing_token
            ),
            Violation::Counter { expected, actual } => {
                write!(f, "P2 counter is {actual}, expected {expected}")
            }
            Violation::Capacity { holders, permits } => write!(
                f,
                "P1 over capacity on '{}': {} holders valid at once with {permits} permits (tokens {:?})",
                holders[0].resource,
                holders.len(),
                holders.iter().map(|g| g.fencing_token).collect::<Vec<_>>()
            ),
            Violation::Validity { grant, bound } => write!(
                f,
                "P3 {} on '{}' reported validity {:?}, allowed at most {bound:?} (and > 0)",
                grant.client, grant.resource, grant.validity
            ),
            Violation::TokenOrder { earlier, later } => write!(
                f,
                "P9 on '{}': {} got token {} after {} had token {}",
                later.resource, later.client, later.fencing_token, earlier.client, earlier.fencing_token
            ),
        }
    }
}

/// A thread-safe, cloneable record of grants (clones share the record).
#[derive(Clone, Debug, Default)]
pub struct History {
    grants: Arc<Mutex<Vec<Grant>>>,
}

impl History {
    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    /// Records a grant and returns its id.
    pub fn record(&self, grant: Grant) -> GrantId {
        let mut grants = self.lock();
        grants.push(grant);
        GrantId(grants.len() - 1)
    }

    /// Marks when the holder of `id` stopped relying on the lock.
    pub fn released(&self, id: GrantId, at: Instant) {
        self.lock()[id.0].released_at = Some(at);
    }

    /// Records that at `at` the holder of `id` read its validity as
    /// `validity` (after an extend or renewal): if its lease had not ended
    /// by then, it now ends at `at + validity`. (A reading after the end
    /// cannot revive it.)
    pub fn revalidated(&self, id: GrantId, at: Instant, validity: Duration) {
        let grant = &mut self.lock()[id.0];
        let lease_end = grant
            .revalidated
            .map_or(grant.acquired_at + grant.validity, |(at, validity)| at + validity);
        if at < lease_end {
            grant.revalidated = Some((at, validity));
        }
    }

    /// A copy of every grant so far.
    pub fn grants(&self) -> Vec<Grant> {
        self.lock().clone()
    }

    /// How many grants were recorded.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// P1, P3 and P9 over the whole history.
    pub fn check(&self, options: &CheckOptions) -> Vec<Violation> {
        let grants = self.grants();
        let mut violations = overlaps(&grants);
        violations.extend(validity_violations(&grants, options));
        violations.extend(token_order_violations(&grants));
        violations
    }

    /// Only P1: overlapping holders.
    pub fn overlaps(&self) -> Vec<Violation> {
        overlaps(&self.grants())
    }

    /// P1 for a semaphore of `permits`: the first instant of each resource
    /// at which more than `permits` holders were valid, if any.
    pub fn capacity_violations(&self, permits: usize) -> Vec<Violation> {
        by_resource(&self.grants())
            .into_iter()
            .filter_map(|same| {
                let (_, at) = peak(&same)?;
                let holders: Vec<Grant> = same
                    .iter()
                    .filter(|g| g.acquired_at <= at && at < g.valid_until())
                    .map(|g| (*g).clone())
                    .collect();
                (holders.len() > permits).then_some(Violation::Capacity { holders, permits })
            })
            .collect()
    }

    /// P1 for a read-write lock: grants that overlap where either is a
    /// writer (`is_writer`); readers may overlap each other. And P9 for
    /// it: a writer's token is larger than every grant's before it, and
    /// smaller than every grant's after it.
    pub fn read_write_violations(&self, is_writer: impl Fn(&Grant) -> bool) -> Vec<Violation> {
        let mut found = Vec::new();
        for same in by_resource(&self.grants()) {
            for (i, first) in same.iter().enumerate() {
                for second in &same[i + 1..] {
                    if !is_writer(first) && !is_writer(second) {
                        continue;
                    }
                    let (first, second) = ((*first).clone(), (*second).clone());
                    if first.overlaps(&second) {
                        found.push(Violation::Overlap { first, second });
                    } else if first.fencing_token >= second.fencing_token {
                        found.push(Violation::TokenOrder {
                            earlier: first,
                            later: second,
                        });
                    }
                }
            }
        }
        found
    }

    /// The most holders of `resource` valid at one instant.
    pub fn max_concurrent(&self, resource: &str) -> usize {
        let grants = self.grants();
        let same: Vec<&Grant> = grants.iter().filter(|g| g.resource == resource).collect();
        peak(&same).map_or(0, |(count, _)| count)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Grant>> {
        // Plain data: a panicking recorder cannot leave it half-written.
        self.grants
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// P2: a counter incremented once per grant under the lock must end exact.
pub fn check_counter(expected: u64, actual: u64) -> Option<Violation> {
    (expected != actual).then_some(Violation::Counter { expected, actual })
}

/// Grants of each resource in the order their acquire calls returned.
fn by_resource(grants: &[Grant]) -> Vec<Vec<&Grant>> {
    let mut resources: Vec<&str> = grants.iter().map(|g| g.resource.as_str()).collect();
    resources.sort_unstable();
    resources.dedup();
    resources
        .into_iter()
        .map(|resource| {
            let mut same: Vec<&Grant> = grants.iter().filter(|g| g.resource == resource).collect();
            same.sort_by_key(|g| g.acquired_at);
            same
        })
        .collect()
}

/// The most grants valid at one instant, and the first such instant: a
/// sweep over the starts and ends of their validity.
fn peak(grants: &[&Grant]) -> Option<(usize, Instant)> {
    let mut events: Vec<(Instant, i32)> = grants
        .iter()
        .filter(|g| g.acquired_at < g.valid_until())
        .flat_map(|g| [(g.acquired_at, 1), (g.valid_until(), -1)])
        .collect();
    // At equal instants an end comes first: a validity is half-open.
    events.sort();
    let (mut now, mut best) = (0i32, None::<(usize, Instant)>);
    for (at, step) in events {
        now += step;
        if best.is_none_or(|(count, _)| now as usize > count) && now > 0 {
            best = Some((now as usize, at));
        }
    }
    best
}

/// P1. Sorted by acquisition, a grant can only overlap later grants that
/// start before it ends, so the scan stops early.
fn overlaps(grants: &[Grant]) -> Vec<Violation> {
    let mut found = Vec::new();
    for same in by_resource(grants) {
        for (i, first) in same.iter().enumerate() {
            for second in same[i + 1..]
                .iter()
                .take_while(|g| g.acquired_at < first.valid_until())
            {
                if first.overlaps(second) {
                    found.push(Violation::Overlap {
                        first: (*first).clone(),
                        second: (*second).clone(),
                    });
                }
            }
        }
    }
    found
}

/// The largest validity a grant may report: its ttl less the safety margin
/// and less the least round trip the faults allow.
pub fn validity_bound(ttl: Duration, options: &CheckOptions) -> Duration {
    let margin = ttl.mul_f64(options.drift_factor) + Duration::from_millis(2);
    ttl.saturating_sub(margin).saturating_sub(options.min_round_trip)
}

/// P3. The client knows when it sent the granting requests; from outside we
/// know that was no earlier than the call started, so the validity counted
/// from the return can never exceed `ttl − margin − min_round_trip`.
fn validity_violations(grants: &[Grant], options: &CheckOptions) -> Vec<Violation> {
    grants
        .iter()
        .filter_map(|grant| {
            let bound = validity_bound(grant.ttl, options);
            (grant.validity.is_zero() || grant.validity > bound).then(|| Violation::Validity {
                grant: grant.clone(),
                bound,
            })
        })
        .collect()
}

/// P9. In the order acquisitions returned, tokens must strictly increase.
fn token_order_violations(grants: &[Grant]) -> Vec<Violation> {
    by_resource(grants)
        .into_iter()
        .flat_map(|same| {
            same.windows(2)
                .filter(|pair| pair[1].fencing_token <= pair[0].fencing_token)
                .map(|pair| Violation::TokenOrder {
                    earlier: pair[0].clone(),
                    later: pair[1].clone(),
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_millis(1000);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A grant acquired `start` ms after `t0`, valid `validity` ms, released at `end` ms.
    fn grant(t0: Instant, client: &str, start: u64, validity: u64, end: Option<u64>, token: u64) -> Grant {
        let mut g = Grant::new(
            client,
            "r",
            t0 + ms(start),
            t0 + ms(start + 1),
            ms(validity),
            TTL,
            token,
        );
        g.released_at = end.map(|e| t0 + ms(e));
        g
    }

    fn kinds(violations: &[Violation]) -> Vec<&'static str> {
        violations
            .iter()
            .map(|v| match v {
                Violation::Overlap { .. } => "overlap",
                Violation::Counter { .. } => "counter",
                Violation::Capacity { .. } => "capacity",
                Violation::Validity { .. } => "validity",
                Violation::TokenOrder { .. } => "token",
            })
            .collect()
    }

    #[test]
    fn a_clean_history_passes() {
        let t0 = Instant::now();
        let history = History::new();
        history.record(grant(t0, "a", 0, 900, Some(100), 1));
        history.record(grant(t0, "b", 100, 900, Some(300), 2));
        // c acquired after b's validity ran out, without b releasing.
        history.record(grant(t0, "c", 1100, 900, None, 3));
        assert!(history.check(&CheckOptions::default()).is_empty());
        assert_eq!(check_counter(3, 3), None);
    }

    #[test]
    fn a_semaphore_history_is_checked_against_its_permits() {
        let t0 = Instant::now();
        let history = History::new();
        history.record(grant(t0, "a", 0, 900, Some(300), 1));
        history.record(grant(t0, "b", 100, 900, Some(400), 2));
        // c starts exactly when a releases: two at once, never three.
        history.record(grant(t0, "c", 299, 900, Some(500), 3));
        assert_eq!(history.max_concurrent("r"), 2);
        assert!(history.capacity_violations(2).is_empty());
        history.record(grant(t0, "d", 350, 900, None, 4));
        assert_eq!(history.max_concurrent("r"), 3);
        let violations = history.capacity_violations(2);
        assert_eq!(kinds(&violations), ["capacity"]);
        assert!(
            violations[0].to_string().contains("3 holders"),
            "{}",
            violations[0]
        );
    }

    #[test]
    fn readers_may_overlap_but_nothing_overlaps_a_writer() {
        let t0 = Instant::now();
        let history = History::new();
        history.record(grant(t0, "reader a", 0, 900, Some(300), 1));
        history.record(grant(t0, "reader b", 100, 900, Some(400), 2));
        history.record(grant(t0, "writer c", 500, 900, Some(600), 3));
        let is_writer = |g: &Grant| g.client.starts_with("writer");
        assert!(history.read_write_violations(is_writer).is_empty());
        history.record(grant(t0, "reader d", 550, 900, Some(700), 4));
        history.record(grant(t0, "writer e", 800, 900, Some(900), 2));
        let violations = history.read_write_violations(is_writer);
        assert_eq!(kinds(&violations), ["token", "overlap", "token", "token"]);
    }

    #[test]
    fn a_planted_overlap_is_found() {
        let t0 = Instant::now();
        let history = History::new();
        history.record(grant(t0, "a", 0, 900, None, 1));
        history.record(grant(t0, "b", 500, 900, Some(600), 2));
        let violations = history.check(&CheckOptions::default());
        assert_eq!(kinds(&violations), ["overlap"]);
        assert!(violations[0].to_string().contains("P1"), "{}", violations[0]);
    }

    #[test]
    fn a_release_ends_the_interval_and_other_resources_do_not_collide() {
        let t0 = Instant::now();
        let history = History::new();
        let a = history.record(grant(t0, "a", 0, 900, None, 1));
        history.record(grant(t0, "b", 500, 900, None, 2));
        assert_eq!(history.overlaps().len(), 1);
        history.released(a, t0 + ms(400));
        assert!(history.overlaps().is_empty());
        let mut other = grant(t0, "c", 450, 900, None, 1);
        other.resource = "elsewhere".into();
        history.record(other);
        assert!(history.check(&CheckOptions::default()).is_empty());
    }

    #[test]
    fn a_revalidated_lease_ends_where_the_holder_last_read_it() {
        let t0 = Instant::now();
        let history = History::new();
        // a's grant ran until 901 ms; at 100 ms an extend made it read 5 s.
        let a = history.record(grant(t0, "a", 0, 900, None, 1));
        history.revalidated(a, t0 + ms(100), ms(5000));
        history.record(grant(t0, "b", 2000, 900, None, 2));
        assert_eq!(kinds(&history.check(&CheckOptions::default())), ["overlap"]);
        // Read again as 300 ms at 200 ms: over before b.
        history.revalidated(a, t0 + ms(200), ms(300));
        assert!(history.check(&CheckOptions::default()).is_empty());
    }

    #[test]
    fn a_planted_lost_update_is_found() {
        assert_eq!(
            check_counter(2000, 1999),
            Some(Violation::Counter {
                expected: 2000,
                actual: 1999
            })
        );
    }

    #[test]
    fn planted_validity_violations_are_found() {
        let t0 = Instant::now();
        let history = History::new();
        // The bound for a 1 s ttl with drift 0.01 is 988 ms.
        history.record(grant(t0, "ok", 0, 988, Some(10), 1));
        history.record(grant(t0, "too-long", 20, 989, Some(30), 2));
        history.record(grant(t0, "zero", 40, 0, Some(50), 3));
        let violations = history.check(&CheckOptions::default());
        assert_eq!(kinds(&violations), ["validity", "validity"]);
        // With a known 40 ms round trip, 988 ms is too long as well.
        let strict = CheckOptions {
            min_round_trip: ms(40),
            ..CheckOptions::default()
        };
        assert_eq!(history.check(&strict).len(), 3);
    }

    #[test]
    fn planted_token_inversions_are_found() {
        let t0 = Instant::now();
        let history = History::new();
        history.record(grant(t0, "a", 0, 900, Some(10), 5));
        history.record(grant(t0, "b", 20, 900, Some(30), 5)); // duplicate
        history.record(grant(t0, "c", 40, 900, Some(50), 4)); // regression
        history.record(grant(t0, "d", 60, 900, Some(70), 9));
        let violations = history.check(&CheckOptions::default());
        assert_eq!(kinds(&violations), ["token", "token"]);
        assert!(violations[1].to_string().contains("token 4"), "{}", violations[1]);
    }
}

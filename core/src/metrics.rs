//! What a client counts (design.md §8): acquisitions, failures by kind,
//! losses by reason, releases, renewals, the locks held and the calls
//! waiting, and how long acquisitions took. Kept in atomics for
//! [`crate::Client::metrics`], and sent to the `metrics` crate's facade, so
//! whatever exporter the application installed (Prometheus, StatsD, …) sees
//! them too. The facade's handles are registered once, when the client is
//! built, so the recorder must be installed before: looking them up per
//! call cost 1.5–3 µs of client CPU per lock cycle (docs/performance.md).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crate::error::ErrorKind;
use crate::lock_state::LossReason;

/// The upper bounds of the acquire-latency buckets, in seconds.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The names under which the facade receives them (Prometheus style).
pub mod names {
    /// Counter: acquisitions that returned a lock (or permit, or grant).
    pub const ACQUIRED: &str = "fencelock_acquired_total";
    /// Counter, label `kind`: acquisitions that failed, by error kind.
    pub const FAILED: &str = "fencelock_failed_total";
    /// Counter, label `reason`: held locks lost, by reason.
    pub const LOST: &str = "fencelock_lost_total";
    /// Counter: releases that succeeded.
    pub const RELEASED: &str = "fencelock_released_total";
    /// Counter: automatic renewals that succeeded.
    pub const RENEWALS: &str = "fencelock_renewals_total";
    /// Counter: automatic renewals that failed (retried until the lock is lost).
    pub const RENEWAL_FAILURES: &str = "fencelock_renewal_failures_total";
    /// Gauge: locks held now.
    pub const HELD: &str = "fencelock_held";
    /// Gauge: acquire calls waiting in a queue now.
    pub const WAITING: &str = "fencelock_waiting";
    /// Histogram, seconds: how long acquire calls took (success or not).
    pub const ACQUIRE_LATENCY: &str = "fencelock_acquire_latency_seconds";
}

/// A snapshot of one client's counters ([`crate::Client::metrics`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Metrics {
    /// Acquisitions that returned a lock, a permit or a read or write grant.
    pub acquired: u64,
    /// Acquisitions that failed, per error kind (every kind, zeros included).
    pub failed: Vec<(ErrorKind, u64)>,
    /// Held locks lost, per reason (every reason, zeros included).
    pub lost: Vec<(LossReason, u64)>,
    /// Releases that succeeded.
    pub released: u64,
    /// Automatic renewals that succeeded.
    pub renewals: u64,
    /// Automatic renewals that failed.
    pub renewal_failures: u64,
    /// Locks held now (their handle alive and not released or lost).
    pub held: u64,
    /// Acquire calls waiting in a queue now.
    pub waiting: u64,
    /// How long acquire calls took, successful or not.
    pub acquire_latency: Latency,
}

impl Metrics {
    /// The failures of one kind.
    pub fn failed(&self, kind: ErrorKind) -> u64 {
        self.failed
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }

    /// The losses for one reason.
    pub fn lost(&self, reason: LossReason) -> u64 {
        self.lost
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n)
    }
}

/// A latency histogram: count, sum and cumulative buckets.
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    /// How many were observed.
    pub count: u64,
    /// Their sum.
    pub sum: Duration,
    /// `(upper bound, how many took at most that long)`, for each of
    /// [`LATENCY_BUCKETS`] (cumulative, as Prometheus counts them); the
    /// rest took longer than the last bound.
    pub buckets: Vec<(Duration, u64)>,
}

impl Latency {
    /// An estimate of the `q` quantile (0 to 1): the upper bound of the
    /// bucket it falls in, or `None` with nothing observed or past the last
    /// bucket.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        if self.count == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * self.count as f64).ceil().max(1.0) as u64;
        self.buckets
            .iter()
            .find(|(_, below)| *below >= rank)
            .map(|(bound, _)| *bound)
    }
}

/// The facade's handles of one client, registered when it is built.
struct Handles {
    acquired: metrics::Counter,
    failed: Vec<metrics::Counter>,
    lost: Vec<metrics::Counter>,
    released: metrics::Counter,
    renewals: metrics::Counter,
    renewal_failures: metrics::Counter,
    held: metrics::Gauge,
    waiting: metrics::Gauge,
    latency: metrics::Histogram,
}

impl Handles {
    fn register() -> Self {
        Handles {
            acquired: metrics::counter!(names::ACQUIRED),
            failed: ErrorKind::ALL
                .iter()
                .map(|kind| metrics::counter!(names::FAILED, "kind" => kind.as_str()))
                .collect(),
            lost: LossReason::ALL
                .iter()
                .map(|reason| metrics::counter!(names::LOST, "reason" => reason.name()))
                .collect(),
            released: metrics::counter!(names::RELEASED),
            renewals: metrics::counter!(names::RENEWALS),
            renewal_failures: metrics::counter!(names::RENEWAL_FAILURES),
            held: metrics::gauge!(names::HELD),
            waiting: metrics::gauge!(names::WAITING),
            latency: metrics::histogram!(names::ACQUIRE_LATENCY),
        }
    }
}

/// The live counters of one client.
pub(crate) struct ClientMetrics {
    /// Label the facade's counters with the resource name too (then
    /// registered per call, as the name is only known then).
    per_resource: bool,
    facade: Handles,
    acquired: AtomicU64,
    failed: Vec<AtomicU64>,
    lost: Vec<AtomicU64>,
    released: AtomicU64,
    renewals: AtomicU64,
    renewal_failures: AtomicU64,
    held: AtomicI64,
    waiting: AtomicI64,
    latency_count: AtomicU64,
    latency_sum_ns: AtomicU64,
    latency_buckets: Vec<AtomicU64>,
}

impl Default for ClientMetrics {
    fn default() -> Self {
        ClientMetrics::new(false)
    }
}

impl ClientMetrics {
    /// Zeros; with `per_resource`, the facade's counters carry a `resource` label.
    pub(crate) fn new(per_resource: bool) -> Self {
        let zeros = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect();
        ClientMetrics {
            per_resource,
            facade: Handles::register(),
            acquired: AtomicU64::new(0),
            failed: zeros(ErrorKind::ALL.len()),
            lost: zeros(LossReason::ALL.len()),
            released: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            renewal_failures: AtomicU64::new(0),
            held: AtomicI64::new(0),
            waiting: AtomicI64::new(0),
            latency_count: AtomicU64::new(0),
            latency_sum_ns: AtomicU64::new(0),
            latency_buckets: zeros(LATENCY_BUCKETS.len()),
        }
    }
}

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl ClientMetrics {
    /// Whether the facade's counters carry the resource's name.
    pub(crate) fn per_resource(&self) -> bool {
        self.per_resource
    }

    /// The facade's `resource` label (allocated: per-resource labels only).
    fn labels(&self, resource: &str) -> Vec<metrics::Label> {
        vec![metrics::Label::new("resource", resource.to_owned())]
    }

    /// An acquire call on `resource` ended after `took`: with a lock, or
    /// failed with `kind`.
    pub(crate) fn acquire_ended(&self, resource: &str, took: Duration, failed: Option<ErrorKind>) {
        match failed {
            None => {
                add(&self.acquired);
                match self.per_resource {
                    true => metrics::counter!(names::ACQUIRED, self.labels(resource).iter()).increment(1),
                    false => self.facade.acquired.increment(1),
                }
            }
            Some(kind) => {
                let i = ErrorKind::ALL.iter().position(|k| *k == kind).unwrap_or_default();
                add(&self.failed[i]);
                if self.per_resource {
                    let mut labels = self.labels(resource);
                    labels.push(metrics::Label::from_static_parts("kind", kind.as_str()));
                    metrics::counter!(names::FAILED, labels.iter()).increment(1);
                } else {
                    self.facade.failed[i].increment(1);
                }
            }
        }
        add(&self.latency_count);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.latency_sum_ns.fetch_add(nanos, Ordering::Relaxed);
        let seconds = took.as_secs_f64();
        for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&self.latency_buckets) {
            if seconds <= *bound {
                add(bucket);
            }
        }
        self.facade.latency.record(seconds);
    }

    pub(crate) fn lost(&self, resource: &str, reason: LossReason) {
        let i = LossReason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or_default();
        add(&self.lost[i]);
        if self.per_resource {
            let mut labels = self.labels(resource);
            labels.push(metrics::Label::from_static_parts("reason", reason.name()));
            metrics::counter!(names::LOST, labels.iter()).increment(1);
        } else {
            self.facade.lost[i].increment(1);
        }
    }

    pub(crate) fn released(&self, resource: &str) {
        add(&self.released);
        match self.per_resource {
            true => metrics::counter!(names::RELEASED, self.labels(resource).iter()).increment(1),
            false => self.facade.released.increment(1),
        }
    }

    pub(crate) fn renewed(&self, ok: bool) {
        if ok {
            add(&self.renewals);
            self.facade.renewals.increment(1);
        } else {
            add(&self.renewal_failures);
            self.facade.renewal_failures.increment(1);
        }
    }

    /// A lock is held from now on (`+1`) or no more (`-1`).
    pub(crate) fn held(&self, change: i64) {
        self.held.fetch_add(change, Ordering::Relaxed);
        self.facade.held.increment(change as f64);
    }

    /// An acquire call starts waiting in a queue (`+1`) or stops (`-1`).
    pub(crate) fn waiting(&self, change: i64) {
        self.waiting.fetch_add(change, Ordering::Relaxed);
        self.facade.waiting.increment(change as f64);
    }

    pub(crate) fn snapshot(&self) -> Metrics {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let gauge = |gauge: &AtomicI64| u64::try_from(gauge.load(Ordering::Relaxed)).unwrap_or(0);
        Metrics {
            acquired: load(&self.acquired),
            failed: ErrorKind::ALL
                .iter()
                .copied()
                .zip(self.failed.iter().map(load))
                .collect(),
            lost: LossReason::ALL
                .iter()
                .copied()
                .zip(self.lost.iter().map(load))
                .collect(),
            released: load(&self.released),
            renewals: load(&self.renewals),
            renewal_failures: load(&self.renewal_failures),
            held: gauge(&self.held),
            waiting: gauge(&self.waiting),
            acquire_latency: Latency {
                count: load(&self.latency_count),
                sum: Duration::from_nanos(load(&self.latency_sum_ns)),
                buckets: LATENCY_BUCKETS
                    .iter()
                    .map(|bound| Duration::from_secs_f64(*bound))
                    .zip(self.latency_buckets.iter().map(load))
                    .collect(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_histogram_counts_cumulatively_and_estimates_quantiles() {
        let metrics = ClientMetrics::default();
        for ms in [0.3, 0.8, 0.8, 4.0, 30.0] {
            metrics.acquire_ended("r", Duration::from_secs_f64(ms / 1000.0), None);
        }
        metrics.acquire_ended("r", Duration::from_secs(20), Some(ErrorKind::Timeout));
        let snapshot = metrics.snapshot();
        let latency = &snapshot.acquire_latency;
        assert_eq!(latency.count, 6);
        assert_eq!(latency.buckets[0], (Duration::from_micros(500), 1));
        assert_eq!(latency.buckets[1].1, 3, "1 ms: cumulative");
        assert_eq!(
            latency.buckets.last().unwrap().1,
            5,
            "20 s is past the last bucket"
        );
        assert_eq!(latency.quantile(0.5), Some(Duration::from_millis(1)));
        assert_eq!(latency.quantile(0.99), None, "in the overflow");
        assert_eq!(snapshot.acquired, 5);
        assert_eq!(snapshot.failed(ErrorKind::Timeout), 1);
        assert_eq!(snapshot.failed(ErrorKind::NotAcquired), 0);
        assert_eq!(snapshot.failed.len(), ErrorKind::ALL.len());
    }
}

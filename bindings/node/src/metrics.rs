//! A client's metrics: the core's snapshot (`NativeClient#metrics`) as
//! plain values, which `lib/metrics.js` shapes into `Client#metrics()`; and
//! the names and latency buckets they are exported with.

use napi_derive::napi;

/// A count for one error kind or loss reason.
#[napi(object)]
pub struct NamedCount {
    /// The core's stable name of the kind or reason (`"not_acquired"`, `"deleted"`, …).
    pub name: String,
    /// How many.
    pub count: f64,
}

/// The core's snapshot of a client's counters, flat (`lib/metrics.js` shapes it).
#[napi(object)]
pub struct NativeMetrics {
    /// Acquisitions that returned a lock, a permit or a grant.
    pub acquired: f64,
    /// Acquisitions that failed, per error kind (every kind, in the core's order).
    pub failed: Vec<NamedCount>,
    /// Held locks lost, per reason (every reason, in the core's order).
    pub lost: Vec<NamedCount>,
    /// Releases that succeeded.
    pub released: f64,
    /// Automatic renewals that succeeded.
    pub renewals: f64,
    /// Automatic renewals that failed.
    pub renewal_failures: f64,
    /// Locks held now.
    pub held: f64,
    /// Acquire calls waiting now.
    pub waiting: f64,
    /// How many acquire calls were timed.
    pub latency_count: f64,
    /// Their total duration, in ms.
    pub latency_sum_ms: f64,
    /// How many took at most each of `latencyBucketsMs()` (cumulative).
    pub latency_buckets: Vec<f64>,
    /// The median estimated from the buckets, in ms (absent: none timed, or past the last bucket).
    pub latency_p50_ms: Option<f64>,
    /// The 99th percentile estimated from the buckets, in ms (absent as `latencyP50Ms`).
    pub latency_p99_ms: Option<f64>,
}

/// A whole count as a JavaScript number (exact up to 2^53).
fn number(n: u64) -> f64 {
    n as f64
}

/// A duration in ms (exact for the bucket bounds, whole microseconds).
fn ms(d: std::time::Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

impl From<fencelock::Metrics> for NativeMetrics {
    fn from(m: fencelock::Metrics) -> Self {
        let latency = &m.acquire_latency;
        NativeMetrics {
            acquired: number(m.acquired),
            failed: m
                .failed
                .iter()
                .map(|(kind, n)| NamedCount {
                    name: kind.as_str().to_owned(),
                    count: number(*n),
                })
                .collect(),
            lost: m
                .lost
                .iter()
                .map(|(reason, n)| NamedCount {
                    name: reason.name().to_owned(),
                    count: number(*n),
                })
                .collect(),
            released: number(m.released),
            renewals: number(m.renewals),
            renewal_failures: number(m.renewal_failures),
            held: number(m.held),
            waiting: number(m.waiting),
            latency_count: number(latency.count),
            latency_sum_ms: ms(latency.sum),
            latency_buckets: latency.buckets.iter().map(|(_, n)| number(*n)).collect(),
            latency_p50_ms: latency.quantile(0.5).map(ms),
            latency_p99_ms: latency.quantile(0.99).map(ms),
        }
    }
}

/// The names under which each field of `Client#metrics()` is exported
/// (Prometheus style), as the Rust core's `metrics` facade receives them.
#[napi(object)]
pub struct MetricNames {
    /// Counter: `fencelock_acquired_total`.
    pub acquired: String,
    /// Counter with the label `kind`: `fencelock_failed_total`.
    pub failed: String,
    /// Counter with the label `reason`: `fencelock_lost_total`.
    pub lost: String,
    /// Counter: `fencelock_released_total`.
    pub released: String,
    /// Counter: `fencelock_renewals_total`.
    pub renewals: String,
    /// Counter: `fencelock_renewal_failures_total`.
    pub renewal_failures: String,
    /// Gauge: `fencelock_held`.
    pub held: String,
    /// Gauge: `fencelock_waiting`.
    pub waiting: String,
    /// Histogram, in seconds: `fencelock_acquire_latency_seconds`.
    pub acquire_latency: String,
}

/// The core's metric names (`index.js` exports them as `METRIC_NAMES`).
#[napi]
pub fn metric_names() -> MetricNames {
    use fencelock::metric_names as names;
    MetricNames {
        acquired: names::ACQUIRED.into(),
        failed: names::FAILED.into(),
        lost: names::LOST.into(),
        released: names::RELEASED.into(),
        renewals: names::RENEWALS.into(),
        renewal_failures: names::RENEWAL_FAILURES.into(),
        held: names::HELD.into(),
        waiting: names::WAITING.into(),
        acquire_latency: names::ACQUIRE_LATENCY.into(),
    }
}

/// The upper bounds of the acquire-latency buckets, in ms (`index.js`
/// exports them as `LATENCY_BUCKETS_MS`).
#[napi]
pub fn latency_buckets_ms() -> Vec<f64> {
    fencelock::LATENCY_BUCKETS
        .iter()
        .map(|seconds| ms(std::time::Duration::from_secs_f64(*seconds)))
        .collect()
}

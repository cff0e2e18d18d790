//! The client's metrics snapshot.

use std::time::Duration;

/// A count by name (an error kind or a loss reason).
#[derive(uniffi::Record)]
pub struct NativeNamedCount {
    /// The stable name.
    pub name: String,
    /// How many.
    pub count: u64,
}

/// What a client has counted so far (see `fencelock::Metrics`).
#[derive(uniffi::Record)]
pub struct NativeMetrics {
    /// Successful acquisitions.
    pub acquired: u64,
    /// Failed acquisitions, by error kind.
    pub failed: Vec<NativeNamedCount>,
    /// Locks lost while held, by reason.
    pub lost: Vec<NativeNamedCount>,
    /// Clean releases.
    pub released: u64,
    /// Successful renewals.
    pub renewals: u64,
    /// Failed renewals.
    pub renewal_failures: u64,
    /// Locks held now.
    pub held: u64,
    /// Calls waiting now.
    pub waiting: u64,
    /// How many acquisitions the latency counts.
    pub latency_count: u64,
    /// Their total latency.
    pub latency_sum: Duration,
    /// The buckets' upper bounds.
    pub latency_bucket_bounds: Vec<Duration>,
    /// How many acquisitions fell at or below each bound (cumulative).
    pub latency_bucket_counts: Vec<u64>,
    /// The median latency, if anything was counted.
    pub latency_p50: Option<Duration>,
    /// The 99th percentile, if anything was counted.
    pub latency_p99: Option<Duration>,
}

impl From<fencelock::Metrics> for NativeMetrics {
    fn from(m: fencelock::Metrics) -> Self {
        let latency = &m.acquire_latency;
        NativeMetrics {
            acquired: m.acquired,
            failed: m
                .failed
                .iter()
                .map(|(kind, count)| NativeNamedCount {
                    name: kind.as_str().to_owned(),
                    count: *count,
                })
                .collect(),
            lost: m
                .lost
                .iter()
                .map(|(reason, count)| NativeNamedCount {
                    name: reason.name().to_owned(),
                    count: *count,
                })
                .collect(),
            released: m.released,
            renewals: m.renewals,
            renewal_failures: m.renewal_failures,
            held: m.held,
            waiting: m.waiting,
            latency_count: latency.count,
            latency_sum: latency.sum,
            latency_bucket_bounds: latency.buckets.iter().map(|(bound, _)| *bound).collect(),
            latency_bucket_counts: latency.buckets.iter().map(|(_, count)| *count).collect(),
            latency_p50: latency.quantile(0.5),
            latency_p99: latency.quantile(0.99),
        }
    }
}

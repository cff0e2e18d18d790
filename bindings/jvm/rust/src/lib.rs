//! The native part of the JVM front: uniffi exports over the fencelock core.
//!
//! uniffi generates Kotlin bindings for these exports (package
//! `dev.fencelock.ffi`, see `uniffi.toml`); the hand-written Kotlin API of
//! `bindings/jvm/src/main/kotlin` (`dev.fencelock`) wraps them into what Kotlin
//! and Java users see: `Client`, `Lock : AutoCloseable`, suspend functions and
//! `CompletableFuture`s, `java.time.Duration`, one exception class per error
//! kind. This crate only translates: every decision is the core's.
//!
//! Async exports become Kotlin suspend functions. Dropping one of their
//! futures (a cancelled coroutine) drops the core's future, which undoes a
//! partial acquisition; a lock granted to a caller who stopped waiting is
//! released in the background ([`lock::NativeLock`]).
//!
//! The core's events reach the JVM's `System.Logger` through a callback
//! interface ([`logs::NativeLogSink`]), called on the core's own log
//! delivery thread.

mod client;
mod election;
mod errors;
mod lock;
mod logs;
mod metrics;
mod shared_locks;

pub use client::{FencedValue, NativeClient, NativeClientOptions, NativeLockOptions};
pub use election::{NativeLeader, NativeObservation};
pub use errors::{NativeError, NativeNodeReport};
pub use lock::{NativeLock, NativeLostWatch};
pub use logs::{NativeLogField, NativeLogLevel, NativeLogRecord, NativeLogSink};
pub use metrics::{NativeMetrics, NativeNamedCount};
pub use shared_locks::{NativeRwLock, NativeSemaphore};

uniffi::setup_scaffolding!();

/// The core's limits, for the Kotlin API's constants and its vectors test.
#[derive(uniffi::Record)]
pub struct NativeLimits {
    /// The shortest ttl accepted, in ms.
    pub min_ttl_ms: u64,
    /// The longest ttl accepted, in ms (2^31 − 1).
    pub max_ttl_ms: u64,
    /// The longest wait accepted, in ms (366 days).
    pub max_wait_ms: u64,
    /// The longest resource name (and fenced key) accepted, in bytes.
    pub max_resource_bytes: u32,
    /// The longest key prefix accepted, in bytes.
    pub max_prefix_bytes: u32,
    /// The largest clock-drift factor accepted.
    pub max_drift_factor: f64,
    /// The largest fencing token handed out.
    pub max_fencing_token: u64,
    /// The largest holder id of a fence.
    pub max_holder_id: u64,
    /// The longest value a leader may announce, in bytes.
    pub max_leader_value_bytes: u32,
    /// The most permits a semaphore may have.
    pub max_permits: u32,
}

/// The core's limits.
#[uniffi::export]
pub fn limits() -> NativeLimits {
    NativeLimits {
        min_ttl_ms: millis(fencelock::MIN_TTL),
        max_ttl_ms: millis(fencelock::MAX_TTL),
        max_wait_ms: millis(fencelock::MAX_WAIT),
        max_resource_bytes: small(fencelock::MAX_RESOURCE_LEN),
        max_prefix_bytes: small(fencelock::MAX_PREFIX_LEN),
        max_drift_factor: fencelock::MAX_DRIFT_FACTOR,
        max_fencing_token: fencelock::MAX_FENCING_TOKEN,
        max_holder_id: fencelock::MAX_HOLDER_ID,
        max_leader_value_bytes: small(fencelock::MAX_LEADER_VALUE),
        max_permits: fencelock::MAX_PERMITS,
    }
}

/// One error kind of the core: its stable name and code.
#[derive(uniffi::Record)]
pub struct NativeErrorKind {
    /// The stable name (`"not_acquired"`, …).
    pub name: String,
    /// The stable code (the C ABI's status).
    pub code: i32,
}

/// Every error kind of the core, in code order.
#[uniffi::export]
pub fn error_kinds() -> Vec<NativeErrorKind> {
    fencelock::ErrorKind::ALL
        .iter()
        .map(|kind| NativeErrorKind {
            name: kind.as_str().to_owned(),
            code: kind.code(),
        })
        .collect()
}

/// Every loss reason of the core, by stable name (`"deleted"`, …).
#[uniffi::export]
pub fn loss_reasons() -> Vec<String> {
    fencelock::LossReason::ALL
        .iter()
        .map(|reason| reason.name().to_owned())
        .collect()
}

/// The core's sentence for loss reason `name`, or `name` itself for a
/// reason this version does not know.
#[uniffi::export]
pub fn loss_reason_text(name: String) -> String {
    match fencelock::LossReason::from_name(&name) {
        Some(reason) => reason.to_string(),
        None => name,
    }
}

/// The version of the native library.
#[uniffi::export]
pub fn native_version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// A duration in whole milliseconds, saturating.
pub(crate) fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A size that fits in 32 bits, saturating.
fn small(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

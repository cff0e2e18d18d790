//! The native part of the `fencelock` npm package (napi-rs).
//!
//! `index.js` and `lib/` wrap it into the public API (`Client`, `Lock`, the error
//! classes); this module stays small and mechanical: every operation runs on
//! the Rust core's one internal tokio runtime and settles a promise through
//! [`bridge`], locks carry the core's lost-lock future to an `AbortSignal`
//! through a callback that never keeps the process alive, core errors
//! become the JavaScript classes through a factory `index.js` installs, and
//! the core's events reach `lib/log.js` through [`logs`].

mod args;
mod bridge;
mod client;
mod errors;
mod lock;
mod logs;
mod metrics;
mod observe;
mod rw_lock;
mod semaphore;
mod values;

use napi::bindgen_prelude::{BigInt, Function};
use napi::{Env, JsValue};
use napi_derive::napi;

pub use client::{ClientOptions, FencedValue, NativeClient, NodeLockState};
pub use lock::{
    Canceller, LockHandle, lock_extend, lock_fencing_token, lock_holder, lock_is_held, lock_permit,
    lock_release, lock_remaining_ms, lock_renewals, lock_resource, lock_status, lock_watch_lost,
};
pub use logs::{NativeLogRecord, forward_logs, set_log_level};
pub use metrics::{MetricNames, NamedCount, NativeMetrics, latency_buckets_ms, metric_names};
pub use observe::{Leader, NativeObservation};
pub use rw_lock::NativeRwLock;
pub use semaphore::NativeSemaphore;

/// Installs the JavaScript hooks: `makeError(kind, message, resource, nodes)`
/// builds the error class of a core error kind, `reportError(error)`
/// receives an exception thrown by a callback (instead of crashing the loop),
/// and `keepPolling()` is called after promises were settled.
#[napi(
    ts_args_type = "makeError: (kind: string, message: string, resource: string | null, nodes: string[][]) => Error, reportError: (error: unknown) => void, keepPolling: () => void"
)]
pub fn init(
    env: Env,
    make_error: Function<'_>,
    report_error: Function<'_>,
    keep_polling: Function<'_>,
) -> napi::Result<()> {
    bridge::state(env.raw())?.set_hooks(make_error.raw(), report_error.raw(), keep_polling.raw())
}

/// How many of this thread's operations have a promise not settled yet
/// (0 while the environment shuts down). With `yieldCpu`, first gives the
/// CPU to any other thread ready to run (`sched_yield`), when any operation
/// is pending: `lib/polling.js` polls with it. Never throws, as it is called from
/// `setImmediate` callbacks.
#[napi]
pub fn pending_operations(env: Env, yield_cpu: Option<bool>) -> u32 {
    let pending = bridge::state(env.raw()).map_or(0, |state| state.pending());
    if pending > 0 && yield_cpu == Some(true) {
        std::thread::yield_now();
    }
    u32::try_from(pending).unwrap_or(u32::MAX)
}

/// The core's limits (`index.js` exports them as `MIN_TTL_MS`, …).
#[napi(object)]
pub struct Limits {
    /// The shortest ttl accepted, in ms.
    pub min_ttl_ms: u32,
    /// The longest ttl accepted, in ms (2^31 − 1).
    pub max_ttl_ms: u32,
    /// The longest wait accepted, in ms (366 days).
    pub max_wait_ms: f64,
    /// The longest resource name (and fenced key) accepted, in bytes.
    pub max_resource_len: u32,
    /// The longest key prefix accepted, in bytes.
    pub max_prefix_len: u32,
    /// The largest clock-drift factor accepted.
    pub max_drift_factor: f64,
    /// The largest fencing token handed out.
    pub max_fencing_token: BigInt,
    /// The largest holder id of a fence.
    pub max_holder_id: BigInt,
    /// The longest value a leader may announce, in bytes.
    pub max_leader_value: u32,
    /// The most permits a semaphore may have.
    pub max_permits: u32,
}

/// The core's limits.
#[napi]
pub fn limits() -> Limits {
    Limits {
        min_ttl_ms: fencelock::MIN_TTL.as_millis() as u32,
        max_ttl_ms: fencelock::MAX_TTL.as_millis() as u32,
        max_wait_ms: fencelock::MAX_WAIT.as_millis() as f64,
        max_resource_len: fencelock::MAX_RESOURCE_LEN as u32,
        max_prefix_len: fencelock::MAX_PREFIX_LEN as u32,
        max_drift_factor: fencelock::MAX_DRIFT_FACTOR,
        max_fencing_token: BigInt::from(fencelock::MAX_FENCING_TOKEN),
        max_holder_id: BigInt::from(fencelock::MAX_HOLDER_ID),
        max_leader_value: fencelock::MAX_LEADER_VALUE as u32,
        max_permits: fencelock::MAX_PERMITS,
    }
}

/// The core's sentence for loss reason `name` (`"deleted"`, …), or `name`
/// itself for a reason this version does not know.
#[napi]
pub fn loss_reason_text(name: String) -> String {
    match fencelock::LossReason::from_name(&name) {
        Some(reason) => reason.to_string(),
        None => name,
    }
}

/// The version of the native module.
#[napi]
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// How the addon was built: `"debug"` (cargo's dev profile, with debug
/// assertions, which scripts/test-node.sh builds) or `"release"`. The
/// benchmarks refuse a debug build.
#[napi]
pub const BUILD_PROFILE: &str = if cfg!(debug_assertions) {
    "debug"
} else {
    "release"
};

/// The addon's Rust allocations (not Node's) go through mimalloc: every
/// operation allocates on one thread and frees on another, where glibc's
/// malloc takes arena locks.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

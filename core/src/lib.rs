//! # fencelock
//!
//! Distributed locks over Redis with one core for every language: single-node
//! locks and Redlock over N independent masters (requests in parallel, decided
//! by quorum), auto-renewal with a lost-lock signal, and fencing tokens that
//! stay strictly increasing per resource, in quorum mode too.
//!
//! ```no_run
//! # async fn demo() -> fencelock::Result<()> {
//! use std::time::Duration;
//! use fencelock::{Client, LockOptions};
//!
//! let client = Client::builder()
//!     .nodes(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
//!     .build()
//!     .await?;
//! let lock = client
//!     .acquire("inventory:sku-1", LockOptions::new(Duration::from_secs(10)).wait(Duration::from_secs(5)))
//!     .await?;
//! // Write only with the fencing token: a paused, expired holder is then refused.
//! client.fenced_set("stock:sku-1", "41", lock.fence()).await?;
//! lock.release().await?;
//! # Ok(()) }
//! ```
//!
//! ## What the lock guarantees, and what it does not
//!
//! While [`Lock::is_held`] is true, no other client of the same nodes holds the
//! lock, *provided* the nodes' clocks advance at about the same rate as ours
//! (within the drift factor), no node loses its keys (restart without AOF), and
//! this process is not paused past the lock's validity. A GC pause, a VM
//! freeze or a slow network can still let two holders overlap; that is why
//! every lock carries a [fencing token](Lock::fencing_token) the protected
//! storage must check. See `docs/protocol.md` for the wire protocol and the
//! full argument.

//! ## Runtimes
//!
//! Called from inside a tokio runtime, operations run right there (it must
//! have time enabled, as `#[tokio::main]` gives). Called from anywhere else
//! (another executor, or [`blocking`]), they run on fencelock's own runtime.
//! The watchdog and its connections always live on fencelock's runtime, so
//! renewals go on whatever the caller's runtime is doing.

#![warn(missing_docs)]

mod acquire;
mod background;
mod backoff;
pub mod blocking;
mod cancel;
mod claim;
mod client;
mod compare_and_act;
mod config;
mod connection;
mod deadline;
mod election;
mod endpoint;
mod error;
mod fenced;
mod fencing;
mod finishing;
mod inspect;
mod keys;
mod lease;
mod linger;
mod lock;
mod lock_state;
mod log_forward;
mod metrics;
mod migrate;
mod node;
mod node_set;
mod observe;
mod options;
mod persistence;
mod postgres;
mod queue;
mod quorum;
mod runtime;
mod rw_lock;
mod scripts;
mod semaphore;
mod set_if_equal;
mod settings;
mod shared;
mod startup;
mod store;
mod tls;
mod token;
mod waiter;
mod wake;
mod watchdog;

pub use background::{is_settled, settle};
pub use backoff::RetryPolicy;
pub use cancel::{CancelOnDrop, Canceller};
pub use client::Client;
pub use config::{ClientBuilder, MAX_DRIFT_FACTOR};
pub use election::{CampaignOptions, Leadership, MAX_LEADER_VALUE};
pub use error::{Error, ErrorKind, NodeFailure, NodeOutcome, NodeReport, Result};
pub use fenced::{Fence, MAX_HOLDER_ID};
pub use fencing::MAX_FENCING_TOKEN;
pub use inspect::NodeLockState;
pub use keys::{DEFAULT_PREFIX, MAX_PERMITS, MAX_PREFIX_LEN, MAX_RESOURCE_LEN};
pub use linger::MAX_RETAKES;
pub use lock::{Lock, Unclaimed};
pub use lock_state::{LockStatus, LossReason};
pub use log_forward::{
    LogLevel, LogRecord, LogSink, forward_logs, log_level, set_log_level, stop_forwarding_logs,
};
pub use metrics::{LATENCY_BUCKETS, Latency, Metrics, names as metric_names};
pub use observe::{Leader, Observation};
pub use options::{LockOptions, MAX_TTL, MAX_WAIT, MIN_TTL};
pub use runtime::{
    DEFAULT_WORKER_THREADS, MAX_WORKER_THREADS, WORKER_THREADS_ENV, block_on, handle as runtime_handle,
    on_runtime,
};
pub use rw_lock::RwLock;
pub use scripts::PROTOCOL_VERSION;
pub use semaphore::Semaphore;
pub use settings::ClientSettings;
pub use tls::TlsVersion;
pub use token::TOKEN_BYTES;

//! Real `redis-server` (and PostgreSQL) processes for fencelock's tests, demo and benchmarks.
//!
//! Each node runs on a free loopback port chosen at start (never a fixed
//! one: another Redis may be running on the machine), in its own temporary
//! directory, and is stopped by its PID when dropped, also when a test panics.
//! Nothing here ever kills a process by name.
//!
//! ```no_run
//! let nodes = fencelock_harness::RedisNode::start_many(5, &Default::default());
//! nodes[0].pause();   // SIGSTOP
//! nodes[0].resume();  // SIGCONT
//! nodes[1].kill();    // SIGKILL
//! nodes[1].restart(); // same port, same data directory
//! ```

#![warn(missing_docs)]

mod cluster;
mod history;
mod pgbouncer;
mod postgres;
mod process;
mod proxy;

pub use cluster::RedisCluster;
pub use history::{CheckOptions, Grant, GrantId, History, Violation, check_counter, validity_bound};
pub use pgbouncer::{PgBouncer, pgbouncer_path};
pub use postgres::{PostgresNode, postgres_bin_dir, postgres_installed};
pub use process::{
    NodeOptions, RedisNode, TlsFiles, VALKEY_SERVER_VAR, command_calls_in, redis_server_path,
    valkey_server_path,
};
pub use proxy::{FaultProxy, Mode, ProxyStats};

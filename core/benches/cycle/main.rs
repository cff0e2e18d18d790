//! Lock-cycle benchmark: fencelock against the bare Redis protocol, on real
//! `redis-server` processes started by `fencelock-harness`.
//!
//! What it measures, in one run:
//!
//! 1. Acquire+release cycle latency (p50/p99) and throughput with 32
//!    concurrent tasks on distinct keys, on 1 and 5 nodes, each beside a
//!    FLOOR measured against the same nodes: the bare protocol through the
//!    `redis` crate (one multiplexed connection per node; `SET key val NX PX
//!    ttl`, then an `EVALSHA` compare-and-delete; on 5 nodes both steps go to
//!    every node in parallel and wait for all). Beside it a second bare
//!    client, the FENCED FLOOR, acquires and releases with the protocol's
//!    own ACQUIRE and RELEASE scripts, read from docs/protocol.md (the
//!    fencing `INCR` with the grant, the waiters' queue, the hand-off): the
//!    gap between the two floors is what the protocol's scripts cost Redis,
//!    which no client can avoid; the gap between the fenced floor and
//!    fencelock is what our client adds. The three alternate in rounds so that background load
//!    hits all alike. Beside each row, the CPU time this process and the
//!    redis-servers spent per cycle: on a small machine where client and
//!    nodes share the cores, that is what bounds throughput.
//! 2. Scaling: single-task sequential cycle p50 at 1, 3, 5 and 7 nodes.
//! 3. The watchdog at scale: one client holding 10,000 auto-renewed locks on
//!    one node; process RSS and the renewal traffic seen by Redis
//!    (`INFO stats`, `commandstats`, `errorstats`, `clients`). It runs first,
//!    while the heap is fresh, but is printed after sections 1 and 2.
//! 4. A hand-off: from a holder's release to the grant of a client that
//!    waits for the lock, at 1 and 5 nodes, beside a bare push hand-off
//!    (`PUBLISH` and `SET NX` through the `redis` crate), and what a round
//!    trip costs a process that was idle (`handoff.rs`).
//!
//! The targets are printed beside the results as PASS/MISS; a miss never
//! fails the run (this is a report, not a test). Other load on the machine
//! shows in the results: the load average is printed at the start and end.
//!
//! Run it with `cargo bench -p fencelock --bench cycle` (about two minutes after the build).
//!
//! Where things are:
//!
//! - `measure.rs`: running a cycle from many tasks and timing it, fencelock
//!   beside the floors (`compare`); the knobs of the cycle measurements.
//! - `floor.rs`: the floors, the bare protocol through the `redis` crate.
//! - `throughput.rs`, `scaling.rs`: the printing of sections 1 and 2.
//! - `watchdog.rs`: section 3, its measurement and its printing.
//! - `handoff.rs`: section 4, its measurement (and its bare floor) and its printing.
//! - `server_stats.rs`: the nodes' `INFO` counters.
//! - `proc.rs`: this process's and the nodes' RSS, CPU time, and the load average, from /proc.
//! - `target.rs`: the PASS/MISS targets; `util.rs`: unit conversions and ratios.

mod floor;
mod handoff;
mod measure;
mod proc;
mod scaling;
mod server_stats;
mod target;
mod throughput;
mod util;
mod watchdog;

use fencelock_harness::{NodeOptions, RedisNode};

use handoff::{hand_offs, idle_round_trips, print_hand_offs};
use measure::{TASKS, compare};
use proc::{cores, load_average};
use scaling::print_scaling;
use throughput::print_throughput;
use watchdog::{print_watchdog, watchdog_at_scale};

/// Node counts of the scaling section.
const SCALING_NODES: [usize; 4] = [1, 3, 5, 7];

#[tokio::main]
async fn main() {
    print_header();
    let nodes = RedisNode::start_many(*SCALING_NODES.iter().max().unwrap_or(&1), &NodeOptions::default());
    // First, while the heap is fresh, so its RSS figures are not blurred by earlier runs.
    let watchdog = watchdog_at_scale(&nodes[0]).await;
    let throughput = [
        compare(&nodes[..1], TASKS).await,
        compare(&nodes[..5], TASKS).await,
    ];
    let mut scaling = Vec::new();
    for n in SCALING_NODES {
        scaling.push(compare(&nodes[..n], 1).await);
    }
    let urls: Vec<String> = nodes.iter().map(RedisNode::url).collect();
    let handoff = [hand_offs(&urls[..1]).await, hand_offs(&urls[..5]).await];
    let idle = idle_round_trips(&urls[0]).await;
    print_throughput(&throughput);
    print_scaling(&scaling);
    print_watchdog(&watchdog);
    print_hand_offs(&handoff, &idle);
    println!("\nload average at the end: {}", load_average());
}

fn print_header() {
    println!("fencelock cycle benchmark");
    println!(
        "cores: {}, load average at the start: {}",
        cores(),
        load_average()
    );
    println!("(numbers are from loopback redis-server processes sharing the machine with the client)");
}

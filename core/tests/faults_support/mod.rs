//! Shared pieces of the fault-injection suite (`faults_*.rs`): clients
//! behind fault proxies, recorded acquisitions, seeds, the long-run switch,
//! and holder child processes.
#![allow(dead_code, unused_imports, missing_docs)]

pub mod child;
pub mod clock;
#[path = "../common/mod.rs"]
mod common;

pub use common::{
    GENEROUS_NODE_TIMEOUT, NODE_TIMEOUT, acquire_everywhere, get, lock_key, lock_keys_on,
    lock_survives_a_disconnect, ms, pttl, script_sha, wait_until, wait_until_settled,
};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fencelock::{Client, ClientBuilder, Lock, LockOptions, Result};
pub use fencelock_harness::{
    CheckOptions, FaultProxy, Grant, GrantId, History, Mode, NodeOptions, RedisNode, Violation, check_counter,
};

/// True when the long variants should run (`FENCELOCK_LONG=1`, see scripts/test-long.sh).
pub fn long_run() -> bool {
    std::env::var("FENCELOCK_LONG").is_ok_and(|v| v == "1")
}

/// `short` in CI, `long` with `FENCELOCK_LONG=1`; says which on stderr.
pub fn scale(test: &str, short: usize, long: usize) -> usize {
    if long_run() {
        eprintln!("{test}: long variant ({long})");
        long
    } else {
        eprintln!("{test}: bounded CI variant ({short}); FENCELOCK_LONG=1 runs {long}");
        short
    }
}

/// The seed of a randomized test: `FENCELOCK_SEED` if set (to replay a
/// failure), otherwise fresh. Always printed with the command that replays it.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("FENCELOCK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!(
        "{test}: seed {seed}; replay with FENCELOCK_SEED={seed} cargo test -p fencelock --test {} {test} -- --test-threads=1",
        env!("CARGO_CRATE_NAME")
    );
    seed
}

/// A client of `urls` with the suite's short timeouts.
pub fn builder_for(urls: impl IntoIterator<Item = String>) -> ClientBuilder {
    Client::builder()
        .nodes(urls)
        .node_timeout(NODE_TIMEOUT)
        .connect_timeout(ms(300))
}

/// A client that reaches every node through its own proxy.
pub async fn proxied_client(proxies: &[FaultProxy]) -> Client {
    builder_for(proxies.iter().map(FaultProxy::url))
        .build()
        .await
        .expect("client builds")
}

/// One proxy per node for one client.
pub fn proxies_for(nodes: &[RedisNode]) -> Vec<FaultProxy> {
    FaultProxy::for_ports(nodes.iter().map(RedisNode::port))
}

pub fn set_all(proxies: &[FaultProxy], mode: Mode) {
    for proxy in proxies {
        proxy.set(mode);
    }
}

/// Acquires and records the grant (validity read right after the return).
pub async fn acquire_recorded(
    client: &Client,
    history: &History,
    who: &str,
    resource: &str,
    options: LockOptions,
    ttl: Duration,
) -> Result<(Lock, GrantId)> {
    let requested_at = Instant::now();
    let lock = client.acquire(resource, options).await?;
    let acquired_at = Instant::now();
    let validity = lock.remaining();
    let grant = Grant::new(
        who,
        resource,
        requested_at,
        acquired_at,
        validity,
        ttl,
        lock.fencing_token(),
    );
    Ok((lock, history.record(grant)))
}

/// Panics with every violation listed, if there are any.
pub fn assert_no_violations(violations: &[Violation]) {
    assert!(
        violations.is_empty(),
        "{} violation(s):\n{}",
        violations.len(),
        violations
            .iter()
            .map(|v| format!("  {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The value at `p`-th percentile of `samples` (sorted in place).
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

/// Two workers per client (T18): acquire `resource`, increment the counter on the (unfaulted) storage node
/// only while the lock still reads as held, release. Counts the increments.
pub fn counter_workers(
    clients: &[Client],
    resource: &'static str,
    ttl: Duration,
    history: &History,
    storage: &RedisNode,
    stop: &Arc<AtomicBool>,
    increments: &Arc<AtomicU64>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut workers = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for w in 0..2 {
            let (client, history, url) = (client.clone(), history.clone(), storage.url());
            let (stop, increments) = (stop.clone(), increments.clone());
            workers.push(tokio::spawn(async move {
                let mut store = redis::Client::open(url)
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                    .unwrap();
                let who = format!("client {c} worker {w}");
                while !stop.load(Ordering::Relaxed) {
                    let options = LockOptions::new(ttl).wait(ms(500));
                    let Ok((lock, id)) =
                        acquire_recorded(&client, &history, &who, resource, options, ttl).await
                    else {
                        continue;
                    };
                    let value: Option<u64> = redis::cmd("GET")
                        .arg("counter")
                        .query_async(&mut store)
                        .await
                        .unwrap();
                    if lock.is_held() {
                        let _: () = redis::cmd("SET")
                            .arg("counter")
                            .arg(value.unwrap_or(0) + 1)
                            .query_async(&mut store)
                            .await
                            .unwrap();
                        increments.fetch_add(1, Ordering::Relaxed);
                    }
                    history.released(id, Instant::now());
                    let _ = lock.release().await;
                }
            }));
        }
    }
    workers
}

/// One nemesis step (T18 and its semaphore and read-write variants): heal,
/// a random partition of the (client, node) links, or a pause of one node
/// for 0.1 to 1.5 × `ttl`.
pub fn disturb(
    rng: &mut rand::rngs::StdRng,
    links: &[Vec<FaultProxy>],
    nodes: &[RedisNode],
    paused: &mut Option<(usize, Instant)>,
    ttl: Duration,
) {
    use rand::Rng;
    let choice = rng.random_range(0..10);
    if choice < 3 {
        links.iter().flatten().for_each(|p| p.set(Mode::Pass));
        resume(nodes, paused);
    } else if choice < 8 {
        // Each (client, node) link on its own: partitions are often asymmetric.
        for proxy in links.iter().flatten() {
            proxy.set(match rng.random_range(0..10) {
                0..7 => Mode::Pass,
                7..9 => Mode::Blackhole,
                _ => Mode::DropReplies,
            });
        }
    } else if paused.is_none() {
        let node = rng.random_range(0..nodes.len());
        let pause_for = ttl.mul_f64(rng.random_range(0.1..1.5));
        nodes[node].pause();
        *paused = Some((node, Instant::now() + pause_for));
    }
}

/// Resumes the node a nemesis step paused, if any.
pub fn resume(nodes: &[RedisNode], paused: &mut Option<(usize, Instant)>) {
    if let Some((node, _)) = paused.take() {
        nodes[node].resume();
    }
}

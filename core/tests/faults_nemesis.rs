//! T18: a seeded, Jepsen-style partition nemesis. Three clients, each behind
//! its own proxy to each of five nodes, increment a counter under the lock
//! while the nemesis blackholes or drops replies on random (client, node)
//! links, pauses a node, or heals. 10 s in CI, 60 s with `FENCELOCK_LONG=1`.
//! Replay a failing run with the seed it prints: `FENCELOCK_SEED=<seed>`.

mod faults_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use std::time::{Duration, Instant};

use faults_support::*;
use fencelock::LockOptions;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TTL: Duration = Duration::from_millis(1000);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t18_partition_nemesis_keeps_the_counter_exact_and_holders_apart() {
    let test = "t18_partition_nemesis_keeps_the_counter_exact_and_holders_apart";
    let mut rng = StdRng::seed_from_u64(seed(test));
    let run_for = Duration::from_secs(scale("t18 seconds", 10, 60) as u64);
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let storage = RedisNode::start(&NodeOptions::default());
    let links: Vec<Vec<FaultProxy>> = (0..3).map(|_| proxies_for(&nodes)).collect();
    let mut clients = Vec::new();
    for proxies in &links {
        clients.push(proxied_client(proxies).await);
    }
    let history = History::new();
    let (stop, increments) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let workers = counter_workers(&clients, "t18", TTL, &history, &storage, &stop, &increments);

    let started = Instant::now();
    let mut paused = None;
    let mut steps = 0;
    while started.elapsed() < run_for {
        if paused.is_some_and(|(_, until)| Instant::now() >= until) {
            resume(&nodes, &mut paused);
        }
        disturb(&mut rng, &links, &nodes, &mut paused, TTL);
        steps += 1;
        tokio::time::sleep(ms(rng.random_range(200..=800))).await;
    }
    links.iter().flatten().for_each(|p| p.set(Mode::Pass));
    resume(&nodes, &mut paused);
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }

    // Liveness: with everything healed, a client gets the lock within 2 × ttl.
    let healed = clients[0]
        .acquire("t18", LockOptions::new(TTL).wait(TTL * 2))
        .await;
    assert!(
        healed.is_ok(),
        "no acquisition within 2 x ttl of the heal: {:?}",
        healed.err()
    );

    let counter: u64 = redis::cmd("GET")
        .arg("counter")
        .query(&mut storage.connection())
        .unwrap_or(0);
    eprintln!(
        "t18: {steps} nemesis steps, {} grants, {} increments",
        history.len(),
        increments.load(Ordering::Relaxed)
    );
    let mut violations = history.check(&CheckOptions::default());
    violations.extend(check_counter(increments.load(Ordering::Relaxed), counter));
    assert_no_violations(&violations);
    assert!(
        history.len() >= 10,
        "only {} grants in {run_for:?}",
        history.len()
    );
}

//! Nodes that lose or keep their keys: restarts with and without
//! persistence, eviction, partitions while held (reliability.md T07, T09, T13).

mod faults_support;

use std::time::{Duration, Instant};

use faults_support::*;
use fencelock::{Client, ErrorKind, LockOptions, LockStatus, LossReason};

const TTL: Duration = Duration::from_millis(1000);

/// Three nodes; A reaches only nodes 1 and 2 (node 3 is blackholed for A),
/// B reaches all three directly.
struct Restart {
    nodes: Vec<RedisNode>,
    a_proxies: Vec<FaultProxy>,
    a: Client,
    b: Client,
}

impl Restart {
    async fn start(aof: bool) -> Restart {
        let options = NodeOptions {
            aof,
            ..NodeOptions::default()
        };
        let nodes = RedisNode::start_many(3, &options);
        let a_proxies = proxies_for(&nodes);
        // Single-try acquires (`once`) that need every reachable node, right
        // after a restart (reconnect and script load inside the per-node
        // timeout): not a timeout test, so a generous timeout. The blackholed
        // node costs nothing: the quorum decides without it.
        let a = builder_for(a_proxies.iter().map(FaultProxy::url))
            .node_timeout(GENEROUS_NODE_TIMEOUT)
            .build()
            .await
            .unwrap();
        let b = builder_for(nodes.iter().map(RedisNode::url))
            .node_timeout(GENEROUS_NODE_TIMEOUT)
            .build()
            .await
            .unwrap();
        a_proxies[2].set(Mode::Blackhole);
        Restart {
            nodes,
            a_proxies,
            a,
            b,
        }
    }

    fn once() -> LockOptions {
        LockOptions::new(TTL).auto_renew(false).wait(Duration::ZERO)
    }
}

/// T09a, the known-unsafe control: node 2 restarts at once without
/// persistence, forgets A's key, and B takes nodes 2 and 3 while A is valid.
/// The test passes when the history checker *detects* the overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t09a_restart_without_persistence_is_detected_as_unsafe() {
    let runs = scale("t09a", 3, 20);
    let setup = Restart::start(false).await;
    for run in 0..runs {
        let history = History::new();
        let resource = format!("t09a:{run}");
        let (lock_a, _) = acquire_recorded(&setup.a, &history, "A", &resource, Restart::once(), TTL)
            .await
            .unwrap();
        tokio::task::block_in_place(|| setup.nodes[1].restart());
        let b = acquire_recorded(&setup.b, &history, "B", &resource, Restart::once(), TTL).await;
        assert!(b.is_ok(), "run {run}: B could not take the forgotten lock");
        assert!(lock_a.is_held(), "run {run}: A's validity should still run");
        let overlaps = history.overlaps();
        assert_eq!(overlaps.len(), 1, "run {run}: the checker missed the overlap");
        eprintln!("t09a run {run}: detected as expected: {}", overlaps[0]);
    }
}

/// T09b: the same crash, but node 2 stays down for ttl + margin + 100 ms (a
/// delayed restart). B never reaches a quorum while A is valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t09b_delayed_restart_keeps_the_lock_exclusive() {
    let runs = scale("t09b", 2, 50);
    let setup = Restart::start(false).await;
    for run in 0..runs {
        let history = History::new();
        let resource = format!("t09b:{run}");
        let (lock_a, _) = acquire_recorded(&setup.a, &history, "A", &resource, Restart::once(), TTL)
            .await
            .unwrap();
        setup.nodes[1].kill();
        let crashed = Instant::now();
        while lock_a.is_held() {
            if let Ok((lock, _)) =
                acquire_recorded(&setup.b, &history, "B", &resource, Restart::once(), TTL).await
            {
                drop(lock);
            }
            tokio::time::sleep(ms(20)).await;
        }
        let restart_at = crashed + TTL + TTL.mul_f64(0.01) + ms(100);
        tokio::time::sleep_until(restart_at.into()).await;
        tokio::task::block_in_place(|| setup.nodes[1].restart());
        assert_no_violations(&history.overlaps());
    }
}

/// T09c: with `appendfsync always` the key survives an immediate restart
/// (PTTL about where it was) and B is refused while A is valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t09c_aof_restart_keeps_the_key() {
    let runs = scale("t09c", 2, 50);
    let setup = Restart::start(true).await;
    for run in 0..runs {
        let history = History::new();
        let resource = format!("t09c:{run}");
        let (lock_a, _) = acquire_recorded(&setup.a, &history, "A", &resource, Restart::once(), TTL)
            .await
            .unwrap();
        let before = pttl(&setup.nodes[1], &lock_key(&resource));
        let measured = Instant::now();
        tokio::task::block_in_place(|| setup.nodes[1].restart());
        let after = pttl(&setup.nodes[1], &lock_key(&resource));
        let expected = before - measured.elapsed().as_millis() as i64;
        assert!(
            (after - expected).abs() <= 50,
            "run {run}: PTTL {after}, expected about {expected}"
        );
        while lock_a.is_held() {
            if let Ok((lock, _)) =
                acquire_recorded(&setup.b, &history, "B", &resource, Restart::once(), TTL).await
            {
                drop(lock);
            }
            tokio::time::sleep(ms(20)).await;
        }
        assert_no_violations(&history.overlaps());
    }
    drop(setup.a_proxies);
}

/// T07 with partitions instead of kills (kills: watchdog.rs
/// `minority_loss_keeps_the_lock_majority_loss_loses_it`): 2 of 5 nodes
/// blackholed keep the lock renewed; a 3rd makes it lost as `Unreachable`
/// by the end of its validity, and release fails cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t07_minority_partition_keeps_the_lock_majority_partition_loses_it() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let proxies = proxies_for(&nodes);
    let client = proxied_client(&proxies).await;
    // Partitioning 2 of the 3 nodes a quorum-only grant sits on would
    // rightly lose the lock: start from one held on all 5.
    let lock = acquire_everywhere(&client, &nodes, "t07", LockOptions::new(TTL)).await;
    proxies[0].set(Mode::Blackhole);
    proxies[1].set(Mode::Blackhole);
    let renewals = lock.renewals();
    tokio::time::sleep(TTL * 3).await;
    assert_eq!(
        lock.status(),
        LockStatus::Held,
        "lost with 3 of 5 nodes reachable"
    );
    assert!(lock.is_held());
    assert!(
        lock.renewals() >= renewals + 6,
        "renewals stalled: {}",
        lock.renewals()
    );
    proxies[2].set(Mode::Blackhole);
    let cut = Instant::now();
    let reason = tokio::time::timeout(TTL * 2, lock.lost())
        .await
        .expect("loss signalled");
    assert_eq!(reason, LossReason::Unreachable);
    assert!(
        cut.elapsed() <= TTL + ms(100),
        "loss signalled {:?} after the cut",
        cut.elapsed()
    );
    assert!(!lock.is_held());
    let err = lock.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
}

/// T13, eviction (DEL, FLUSHALL and takeover are in watchdog.rs): under
/// `volatile-ttl` a memory squeeze evicts the short-lived lock key first; the
/// watchdog reports the loss at its next renewal and never re-creates the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t13_evicted_lock_is_reported_lost() {
    let options = NodeOptions {
        extra_args: ["--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl"]
            .map(str::to_owned)
            .to_vec(),
        ..NodeOptions::default()
    };
    let node = RedisNode::start(&options);
    let client = builder_for([node.url()]).build().await.unwrap();
    let lock = client.acquire("t13", LockOptions::new(TTL)).await.unwrap();
    let evicted = tokio::task::block_in_place(|| fill_until_evicted(&node, &lock_key("t13")));
    let reason = tokio::time::timeout(TTL, lock.lost())
        .await
        .expect("eviction detected");
    let delay = evicted.elapsed();
    assert_eq!(reason, LossReason::Deleted);
    assert!(
        delay <= TTL / 3 + NODE_TIMEOUT + ms(50),
        "detected {delay:?} after eviction"
    );
    tokio::time::sleep(TTL / 2).await;
    assert_eq!(
        get(&node, &lock_key("t13")),
        None,
        "the watchdog re-created an evicted key"
    );
}

/// Writes 1 KiB keys with a long ttl until `key` is evicted; returns when.
fn fill_until_evicted(node: &RedisNode, key: &str) -> Instant {
    let mut conn = node.connection();
    let value = "x".repeat(1024);
    for batch in 0..200 {
        let mut pipe = redis::pipe();
        for i in 0..100 {
            pipe.cmd("SET")
                .arg(format!("filler:{batch}:{i}"))
                .arg(&value)
                .arg("PX")
                .arg(600_000)
                .ignore();
        }
        let _: redis::RedisResult<()> = pipe.query(&mut conn);
        let exists: i64 = redis::cmd("EXISTS").arg(key).query(&mut conn).unwrap();
        if exists == 0 {
            return Instant::now();
        }
    }
    panic!("the lock key was never evicted");
}

/// T13, restart without persistence on a single node: the key is gone and
/// the watchdog reports `Deleted` at its next renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t13_single_node_restart_is_reported_lost() {
    let node = RedisNode::start(&NodeOptions::default());
    let client = builder_for([node.url()]).build().await.unwrap();
    let lock = client.acquire("t13r", LockOptions::new(TTL)).await.unwrap();
    tokio::task::block_in_place(|| node.restart());
    let restarted = Instant::now();
    let reason = tokio::time::timeout(TTL, lock.lost())
        .await
        .expect("loss detected");
    assert_eq!(reason, LossReason::Deleted);
    assert!(restarted.elapsed() <= TTL / 3 + NODE_TIMEOUT + ms(50));
}

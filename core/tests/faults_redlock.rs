//! Redlock under network faults made by per-client fault proxies
//! (reliability.md T02, T06 extended, T08, T19, T20).

mod faults_support;

use std::time::{Duration, Instant};

use faults_support::*;
use fencelock::{ErrorKind, LockOptions, NodeOutcome, RetryPolicy};

/// T02: 16 workers on 4 clients, each client behind its own jittery proxies
/// to 5 nodes, increment a counter on a separate storage node under the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t02_redlock_counter_is_exact_through_jittery_proxies() {
    const CLIENTS: usize = 4;
    const WORKERS_PER_CLIENT: usize = 4;
    let rounds = scale("t02", 10, 100);
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let storage = RedisNode::start(&NodeOptions::default());
    let history = History::new();
    let jitter = Mode::Delay {
        each_way: Duration::ZERO,
        jitter: ms(5),
    };
    let mut proxies = Vec::new();
    let mut workers = Vec::new();
    for c in 0..CLIENTS {
        let client_proxies = proxies_for(&nodes);
        set_all(&client_proxies, jitter);
        let client = proxied_client(&client_proxies).await;
        proxies.push(client_proxies);
        for w in 0..WORKERS_PER_CLIENT {
            let (client, history, url) = (client.clone(), history.clone(), storage.url());
            workers.push(tokio::spawn(async move {
                let mut store = redis::Client::open(url)
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                    .unwrap();
                let who = format!("client {c} worker {w}");
                for _ in 0..rounds {
                    let options = LockOptions::new(ms(2000)).wait(ms(30_000));
                    let (lock, id) = acquire_recorded(&client, &history, &who, "t02", options, ms(2000))
                        .await
                        .unwrap_or_else(|e| panic!("{who}: {e}"));
                    increment(&mut store).await;
                    history.released(id, Instant::now());
                    let (remaining, sent) = (lock.remaining(), Instant::now());
                    if let Err(e) = lock.release().await {
                        // On a loaded machine the lease may run out before the release
                        // lands (the history check judges the critical section); a
                        // release refused while the lease still ran would be a bug.
                        assert!(
                            sent.elapsed() >= remaining,
                            "{who}: release failed with {remaining:?} of the lease left: {e}"
                        );
                    }
                }
            }));
        }
    }
    for worker in workers {
        worker.await.unwrap();
    }
    let expected = (CLIENTS * WORKERS_PER_CLIENT * rounds) as u64;
    let actual: u64 = redis::cmd("GET")
        .arg("counter")
        .query(&mut storage.connection())
        .unwrap();
    let mut violations = history.check(&CheckOptions::default());
    violations.extend(check_counter(expected, actual));
    assert_no_violations(&violations);
    assert_eq!(history.len() as u64, expected);
}

/// A non-atomic read-modify-write: it loses updates unless the lock excludes.
async fn increment(store: &mut redis::aio::MultiplexedConnection) {
    let value: Option<u64> = redis::cmd("GET").arg("counter").query_async(store).await.unwrap();
    tokio::task::yield_now().await;
    let _: () = redis::cmd("SET")
        .arg("counter")
        .arg(value.unwrap_or(0) + 1)
        .query_async(store)
        .await
        .unwrap();
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unavailability {
    /// Another owner's value on the node (redsync's "clogged" pools).
    ForeignValue,
    Blackhole,
    Reset,
}

/// T06 extended: every subset of unavailable nodes for N = 1, 3, 5. Killed
/// and paused nodes are in redlock.rs (`quorum_matrix_*`).
async fn quorum_matrix(n: usize, kind: Unavailability) {
    let nodes = RedisNode::start_many(n, &NodeOptions::default());
    let proxies = proxies_for(&nodes);
    // Only a blackhole needs the per-node timeout to end an attempt; with
    // foreign values or resets, a slow answer from a free node must not
    // become a timeout and change the outcome under test.
    let node_timeout = match kind {
        Unavailability::Blackhole => NODE_TIMEOUT,
        Unavailability::ForeignValue | Unavailability::Reset => GENEROUS_NODE_TIMEOUT,
    };
    let client = builder_for(proxies.iter().map(FaultProxy::url))
        .node_timeout(node_timeout)
        .build()
        .await
        .unwrap();
    let quorum = n / 2 + 1;
    for mask in 0u32..(1 << n) {
        let down: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        let resource = format!("matrix:{n}:{mask}");
        for &i in &down {
            match kind {
                Unavailability::ForeignValue => {
                    nodes[i].command(&["SET", &lock_key(&resource), "someone-else", "PX", "5000"]);
                }
                Unavailability::Blackhole => proxies[i].set(Mode::Blackhole),
                Unavailability::Reset => proxies[i].set(Mode::Reset),
            }
        }
        let result = client.try_acquire(&resource, LockOptions::new(ms(5000))).await;
        let case = format!("n={n} {kind:?} down={down:?}");
        let should_succeed = n - down.len() >= quorum;
        match result {
            Ok(Some(lock)) => {
                assert!(should_succeed, "{case}: acquired without a majority");
                lock.release()
                    .await
                    .unwrap_or_else(|e| panic!("{case}: release: {e}"));
            }
            Ok(None) => {
                assert!(!should_succeed, "{case}: 'held by another' with a free majority");
                assert_eq!(
                    kind,
                    Unavailability::ForeignValue,
                    "{case}: said 'taken' for an outage"
                );
            }
            Err(err) => {
                assert!(!should_succeed, "{case}: failed with a majority up: {err}");
                assert_ne!(kind, Unavailability::ForeignValue, "{case}: {err}");
                assert_eq!(err.kind(), ErrorKind::Unavailable, "{case}: {err}");
                for &i in &down {
                    assert!(
                        matches!(
                            err.nodes()[i].outcome,
                            NodeOutcome::TimedOut | NodeOutcome::Failed(_) | NodeOutcome::Pending
                        ),
                        "{case}: node {i} reported {:?}",
                        err.nodes()[i].outcome
                    );
                }
            }
        }
        set_all(&proxies, Mode::Pass);
        // A failed attempt's undo runs in the background: poll for it (well
        // inside the 5 s ttl, so an expiry cannot pass for the undo), behind a
        // round trip so a grant still on its way cannot pass for a clean node.
        wait_until_settled(&client, &resource, ms(3000), || {
            nodes.iter().enumerate().all(|(i, node)| {
                (down.contains(&i) && kind == Unavailability::ForeignValue)
                    || get(node, &lock_key(&resource)).is_none()
            })
        })
        .await;
        assert_only_foreign_keys(&nodes, &down, &resource, kind, &case);
    }
}

/// No node keeps our token; the foreign values are untouched (and then removed).
fn assert_only_foreign_keys(
    nodes: &[RedisNode],
    down: &[usize],
    resource: &str,
    kind: Unavailability,
    case: &str,
) {
    for (i, node) in nodes.iter().enumerate() {
        let value = get(node, &lock_key(resource));
        if kind == Unavailability::ForeignValue && down.contains(&i) {
            assert_eq!(
                value.as_deref(),
                Some("someone-else"),
                "{case}: foreign value touched on node {i}"
            );
            node.command(&["DEL", &lock_key(resource)]);
        } else {
            assert_eq!(
                value, None,
                "{case}: our token left on node {i} after the faults were undone"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t06_quorum_matrix_foreign_values() {
    for n in [1, 3, 5] {
        quorum_matrix(n, Unavailability::ForeignValue).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t06_quorum_matrix_blackholed_nodes() {
    for n in [1, 3, 5] {
        quorum_matrix(n, Unavailability::Blackhole).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t06_quorum_matrix_reset_connections() {
    for n in [1, 3, 5] {
        quorum_matrix(n, Unavailability::Reset).await;
    }
}

/// T08a: one SIGSTOPped node costs nothing (the quorum decides early), and
/// the late grant it applies after SIGCONT is removed by the holder's release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t08a_a_paused_node_neither_slows_acquire_nor_keeps_a_token() {
    let runs = scale("t08a", 20, 50);
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let client = builder_for(nodes.iter().map(RedisNode::url))
        .build()
        .await
        .unwrap();
    let mut latencies = Vec::new();
    for run in 0..runs {
        let paused = &nodes[run % 5];
        paused.pause();
        let resource = format!("t08a:{run}");
        let started = Instant::now();
        let lock = client
            .acquire(&resource, LockOptions::new(ms(2000)).wait(Duration::ZERO))
            .await
            .unwrap_or_else(|e| panic!("run {run}: {e}"));
        latencies.push(started.elapsed());
        lock.release().await.unwrap();
        paused.resume();
        // The resumed node applies its queued grant, then the release: poll
        // for that (the 2 s ttl counts from the late grant, so it cannot pass
        // for the release within 1 s).
        wait_until(ms(1000), || {
            nodes.iter().all(|node| get(node, &lock_key(&resource)).is_none())
        })
        .await;
        for (i, node) in nodes.iter().enumerate() {
            assert_eq!(
                get(node, &lock_key(&resource)),
                None,
                "run {run}: token left on node {i}"
            );
        }
    }
    let worst = percentile(&mut latencies, 1.0);
    eprintln!("t08a: p50 {:?}, max {worst:?}", percentile(&mut latencies, 0.5));
    assert!(
        worst <= NODE_TIMEOUT + ms(10),
        "acquire took {worst:?} with one node paused"
    );
}

/// T08b: with every proxy delaying 20 ms each way, acquire takes about one
/// round trip (the SETs go out in parallel, not one after another), and the
/// reported validity leaves that round trip out (P3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t08b_acquire_is_parallel_and_validity_counts_the_round_trip() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let proxies = proxies_for(&nodes);
    let client = proxied_client(&proxies).await;
    set_all(
        &proxies,
        Mode::Delay {
            each_way: ms(20),
            jitter: Duration::ZERO,
        },
    );
    let history = History::new();
    let mut latencies = Vec::new();
    for run in 0..20 {
        let started = Instant::now();
        let options = LockOptions::new(ms(1000)).auto_renew(false);
        let (lock, id) = acquire_recorded(&client, &history, "c", &format!("t08b:{run}"), options, ms(1000))
            .await
            .unwrap();
        latencies.push(started.elapsed());
        history.released(id, Instant::now());
        lock.release().await.unwrap();
    }
    let p50 = percentile(&mut latencies, 0.5);
    eprintln!("t08b: p50 {p50:?} (sequential would be 200 ms)");
    assert!(p50 < ms(90), "acquire p50 {p50:?}: not parallel");
    let strict = CheckOptions {
        min_round_trip: ms(40),
        ..CheckOptions::default()
    };
    assert_no_violations(&history.check(&strict));
}

/// T08c: 3 of 5 proxies deliver the ACQUIREs but lose the replies. The
/// attempt must fail (never report success), and its undo must remove the
/// tokens the nodes did apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t08c_lost_replies_fail_the_attempt_and_leave_no_token() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let proxies = proxies_for(&nodes);
    let client = proxied_client(&proxies).await;
    for run in 0..10 {
        let resource = format!("t08c:{run}");
        for proxy in &proxies[run % 3..run % 3 + 3] {
            proxy.set(Mode::DropReplies);
        }
        // A 10 s ttl: a token the undo missed cannot expire before the checks below.
        let err = client
            .acquire(&resource, LockOptions::new(ms(10_000)).wait(Duration::ZERO))
            .await
            .expect_err("acquired although 3 of 5 replies were lost");
        assert_eq!(err.kind(), ErrorKind::Unavailable, "run {run}: {err}");
        let applied = nodes
            .iter()
            .filter(|n| get(n, &lock_key(&resource)).is_some())
            .count();
        // The undo runs in the background, and healing the proxies resets the
        // connections that lost replies, cutting an undo still on its way:
        // let it land first.
        wait_until(ms(5000), || {
            nodes.iter().all(|n| get(n, &lock_key(&resource)).is_none())
        })
        .await;
        set_all(&proxies, Mode::Pass);
        tokio::time::sleep(NODE_TIMEOUT + ms(100)).await;
        for (i, node) in nodes.iter().enumerate() {
            assert_eq!(
                get(node, &lock_key(&resource)),
                None,
                "run {run}: token left on node {i} (applied on {applied} nodes before the undo)"
            );
        }
    }
    assert!(proxies[2].stats().replies_dropped > 0, "the fault never happened");
}

/// T19 (proxy variant; no netem and no nft here): replies later than the
/// per-node timeout do not count, and with jitter and a lossy node the
/// reported validity stays within the bound and uncontended acquires succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t19_late_replies_do_not_count_and_validity_holds_under_jitter_and_loss() {
    let seed = seed("t19_late_replies_do_not_count_and_validity_holds_under_jitter_and_loss");
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let proxies = proxies_for(&nodes);
    let client = proxied_client(&proxies).await;
    // Two nodes lose replies and one answers after 120 ms (> the 100 ms timeout): 2 timely grants only.
    proxies[0].set(Mode::DropReplies);
    proxies[1].set(Mode::DropReplies);
    proxies[2].set(Mode::Delay {
        each_way: ms(60),
        jitter: Duration::ZERO,
    });
    let err = client
        .acquire("t19:late", LockOptions::new(ms(2000)).wait(Duration::ZERO))
        .await
        .expect_err("a reply after the per-node timeout was counted");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    set_all(&proxies, Mode::Pass);

    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let history = History::new();
    let attempts = 40;
    let mut successes = 0;
    for run in 0..attempts {
        for proxy in &proxies {
            proxy.set(Mode::Delay {
                each_way: ms(2),
                jitter: ms(28),
            });
        }
        // One node in five rounds loses its replies: the lossy link.
        if run % 5 == 0 {
            proxies[rng.random_range(0..5)].set(Mode::DropReplies);
        }
        let options = LockOptions::new(ms(2000)).auto_renew(false).wait(Duration::ZERO);
        if let Ok((lock, id)) =
            acquire_recorded(&client, &history, "c", &format!("t19:{run}"), options, ms(2000)).await
        {
            successes += 1;
            history.released(id, Instant::now());
            let _ = lock.release().await;
        }
    }
    eprintln!("t19: {successes}/{attempts} uncontended acquires succeeded");
    let strict = CheckOptions {
        min_round_trip: ms(4),
        ..CheckOptions::default()
    };
    assert_no_violations(&history.check(&strict));
    assert!(
        successes * 10 >= attempts * 9,
        "only {successes}/{attempts} succeeded"
    );
}

/// T20: 16 contenders on 5 nodes all get the lock in the end; no two hold
/// it at once; losers leave no token behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t20_sixteen_contenders_all_acquire_and_leave_nothing() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let history = History::new();
    let clients = [
        builder_for(nodes.iter().map(RedisNode::url))
            .retry(RetryPolicy::new(ms(50), ms(250)))
            .build()
            .await
            .unwrap(),
        builder_for(nodes.iter().map(RedisNode::url))
            .retry(RetryPolicy::new(ms(50), ms(250)))
            .build()
            .await
            .unwrap(),
    ];
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (client, history) = (clients[i % 2].clone(), history.clone());
        tasks.push(tokio::spawn(async move {
            // A 10 s ttl: a loser's token left behind cannot expire before the final check.
            let options = LockOptions::new(ms(10_000)).wait(ms(30_000));
            let (lock, id) = acquire_recorded(
                &client,
                &history,
                &format!("contender {i}"),
                "t20",
                options,
                ms(10_000),
            )
            .await
            .unwrap_or_else(|e| panic!("contender {i}: {e}"));
            tokio::time::sleep(ms(20)).await;
            history.released(id, Instant::now());
            lock.release().await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    eprintln!("t20: 16 contenders done in {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(history.len(), 16);
    assert_no_violations(&history.check(&CheckOptions::default()));
    // Losers' undos run in the background: poll (the 10 s ttl cannot expire meanwhile).
    for (i, node) in nodes.iter().enumerate() {
        assert!(
            wait_until(ms(5000), || lock_keys_on(node).is_empty()).await,
            "a loser's token is left on node {i}"
        );
    }
}

/// T32: with 2 of 5 nodes paused, a release answers once a majority has
/// released (it used to wait for the paused nodes' full per-node timeout),
/// and the requests to the paused nodes still land after they resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t32_a_release_does_not_wait_for_paused_nodes() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    // A long per-node timeout, so waiting for a paused node cannot pass unseen.
    let client = builder_for(nodes.iter().map(RedisNode::url))
        .node_timeout(ms(1000))
        .build()
        .await
        .unwrap();
    let lock = acquire_everywhere(&client, &nodes, "t32", LockOptions::new(ms(30_000))).await;
    let resource = lock.resource().to_owned();
    nodes[3].pause();
    nodes[4].pause();
    let started = Instant::now();
    lock.release().await.unwrap();
    let took = started.elapsed();
    nodes[3].resume();
    nodes[4].resume();
    eprintln!("t32: release with 2 of 5 nodes paused took {took:?}");
    assert!(took < ms(500), "release waited for the paused nodes: {took:?}");
    let clean = wait_until(ms(2000), || {
        nodes.iter().all(|n| get(n, &lock_key(&resource)).is_none())
    })
    .await;
    assert!(
        clean,
        "the release never reached the paused nodes after they resumed"
    );
}

/// A ttl change is never applied after a later one (docs/protocol.md §4.5):
/// 3 nodes, the third behind a 150 ms link each way and its script cache
/// flushed. `extend(2 s)` is decided by the first two; on the third its
/// `EVALSHA` finds no script. 100 ms later `extend(60 s)` goes out, and
/// another client's call caches the script on the third node before it
/// lands there. Before the fix the first extend's `EVAL` fallback went out
/// once its `NOSCRIPT` came back, after the second extend, so the third
/// node kept the key for 2 s while the holder counted 60. Now a ttl change
/// is sent as `EVAL`, which never needs a second send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_change_is_never_applied_after_a_later_one() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let link = FaultProxy::start(nodes[2].port());
    let holder = builder_for([nodes[0].url(), nodes[1].url(), link.url()])
        .node_timeout(ms(2_000))
        .build()
        .await
        .unwrap();
    let other = builder_for([nodes[2].url()]).build().await.unwrap();
    let lock = holder
        .acquire("resent", LockOptions::new(ms(30_000)).auto_renew(false))
        .await
        .unwrap();
    let other_lock = other
        .acquire("other", LockOptions::new(ms(30_000)).auto_renew(false))
        .await
        .unwrap();
    // The acquire was decided by a quorum: its request to the third node may
    // still be on its way, and must land before the flush.
    let key = lock_key("resent");
    assert!(wait_until(ms(2_000), || get(&nodes[2], &key).is_some()).await);
    nodes[2].command(&["SCRIPT", "FLUSH"]);
    link.set(Mode::Delay {
        each_way: ms(150),
        jitter: Duration::ZERO,
    });
    let started = Instant::now();
    lock.extend(ms(2_000)).await.unwrap();
    tokio::time::sleep_until((started + ms(100)).into()).await;
    let later = tokio::spawn(lock.extend_task(ms(60_000)));
    // Lands on the third node between the two extends (150 and 250 ms).
    tokio::time::sleep_until((started + ms(200)).into()).await;
    other_lock.extend(ms(30_000)).await.unwrap();
    later.await.unwrap().unwrap();
    // Long after the first extend's NOSCRIPT came back (300 ms) and any
    // fallback would have landed (450 ms).
    tokio::time::sleep_until((started + ms(1_000)).into()).await;
    for (i, node) in nodes.iter().enumerate() {
        let left = pttl(node, &key);
        assert!(
            left > 50_000,
            "node {i} keeps the key {left} ms after extend(60 s) was its last ttl change"
        );
    }
    lock.release().await.unwrap();
    other_lock.release().await.unwrap();
}

//! Redlock over N independent masters: the quorum matrix, validity, fencing.

mod common;

use std::time::{Duration, Instant};

use common::*;
use fencelock::{ErrorKind, LockOptions, NodeOutcome};

#[derive(Clone, Copy, Debug)]
enum Fault {
    Killed,
    Paused,
}

fn apply(fault: Fault, node: &RedisNode) {
    match fault {
        Fault::Killed => node.kill(),
        Fault::Paused => node.pause(),
    }
}

fn undo(fault: Fault, node: &RedisNode) {
    match fault {
        Fault::Killed => node.restart(),
        Fault::Paused => node.resume(),
    }
}

/// For every subset of unavailable nodes: success iff a majority is up, the
/// error says "unavailable" otherwise, and no token is left on any node.
async fn quorum_matrix(n: usize, fault: Fault) {
    let nodes = RedisNode::start_many(n, &NodeOptions::default());
    // Killed nodes refuse at once: only paused ones need the per-node timeout
    // to end an attempt. Otherwise a live node slow to answer on a busy
    // machine must not become a timeout and flip the outcome under test.
    let node_timeout = match fault {
        Fault::Killed => GENEROUS_NODE_TIMEOUT,
        Fault::Paused => NODE_TIMEOUT,
    };
    let client = builder(&nodes).node_timeout(node_timeout).build().await.unwrap();
    let quorum = n / 2 + 1;
    for mask in 0u32..(1 << n) {
        let down: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        for &i in &down {
            apply(fault, &nodes[i]);
        }
        let resource = format!("matrix:{n}:{mask}");
        let started = Instant::now();
        let result = client.try_acquire(&resource, LockOptions::new(ms(5000))).await;
        let elapsed = started.elapsed();
        let should_succeed = n - down.len() >= quorum;
        match result {
            Ok(Some(lock)) => {
                assert!(
                    should_succeed,
                    "n={n} {fault:?} {down:?}: acquired without a majority"
                );
                assert!(lock.is_held());
                let _ = lock.release().await;
            }
            Ok(None) => panic!("n={n} {fault:?} {down:?}: reported 'held by another' with no other holder"),
            Err(err) => {
                assert!(
                    !should_succeed,
                    "n={n} {fault:?} {down:?}: failed with a majority up: {err}"
                );
                assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
                assert_eq!(err.nodes().len(), n);
                for &i in &down {
                    assert!(
                        matches!(
                            err.nodes()[i].outcome,
                            NodeOutcome::TimedOut | NodeOutcome::Failed(_) | NodeOutcome::Pending
                        ),
                        "node {i} reported {:?}",
                        err.nodes()[i].outcome
                    );
                }
            }
        }
        // Bounded latency: a dead or paused minority costs at most one per-node timeout.
        assert!(
            elapsed < NODE_TIMEOUT * 3 + ms(200),
            "n={n} {fault:?} {down:?}: took {elapsed:?}"
        );
        for &i in &down {
            undo(fault, &nodes[i]);
        }
        // A failed attempt's clean-up runs in the background, and a resumed
        // node still has to apply its queued grant and release: poll, with a
        // deadline well inside the 5 s ttl so an expiry cannot pass for a release.
        let holding = || -> Vec<usize> { (0..n).filter(|&i| !lock_keys_on(&nodes[i]).is_empty()).collect() };
        wait_until_settled(&client, &resource, ms(3000), || holding().is_empty()).await;
        let left = holding();
        assert!(
            left.is_empty(),
            "n={n} {fault:?} {down:?}: token left on nodes {left:?} after the faults were undone"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_matrix_killed_nodes() {
    for n in [1, 3, 5] {
        quorum_matrix(n, Fault::Killed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_matrix_paused_nodes() {
    for n in [1, 3, 5] {
        quorum_matrix(n, Fault::Paused).await;
    }
}

#[tokio::test]
async fn foreign_holders_on_a_majority_mean_not_acquired() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    // Not a timeout test: a slow answer must not turn "held by another" into "timed out".
    let client = builder(&nodes)
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .unwrap();
    for node in &nodes[..3] {
        node.command(&["SET", &lock_key("clog"), "someone-else", "PX", "30000"]);
    }
    let err = client
        .acquire("clog", LockOptions::new(ms(30_000)).wait(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotAcquired, "{err}");
    assert!(err.to_string().contains("held by another"), "{err}");
    // The undo runs in the background: poll (the 30 s ttl cannot expire meanwhile).
    for node in &nodes[3..] {
        assert!(
            wait_until_settled(&client, "clog", ms(5000), || get(node, &lock_key("clog"))
                .is_none())
            .await,
            "partial grant not undone"
        );
    }
    for node in &nodes[..3] {
        assert_eq!(get(node, &lock_key("clog")).as_deref(), Some("someone-else"));
    }
}

#[tokio::test]
async fn reported_validity_is_within_the_bound_and_below_every_pttl() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let client = client(&nodes).await;
    let ttl = ms(3000);
    for i in 0..20 {
        let before = Instant::now();
        let lock = client
            .acquire(&format!("validity:{i}"), LockOptions::new(ttl).auto_renew(false))
            .await
            .unwrap();
        let remaining = lock.remaining();
        let bound = ttl - ttl.mul_f64(0.01) - ms(2);
        assert!(
            remaining <= bound,
            "validity {remaining:?} over the bound {bound:?}"
        );
        assert!(
            remaining + before.elapsed() + ms(50) >= bound,
            "validity {remaining:?} far below the bound"
        );
        for node in &nodes {
            let pttl = pttl(node, &lock_key(lock.resource()));
            assert!(
                pttl as u128 + 1 >= lock.remaining().as_millis(),
                "PTTL {pttl} below validity"
            );
        }
        lock.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_counter_under_contention_five_nodes() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    exact_counter(&nodes).await;
}

#[tokio::test]
async fn fencing_counter_is_raised_on_a_majority_when_counters_disagree() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let client = client(&nodes).await;
    // Counters drifted apart (e.g. nodes missed grants while partitioned):
    // any two granting nodes now report different values.
    nodes[0].command(&["SET", "fencelock:{fx}:fence", "100"]);
    nodes[1].command(&["SET", "fencelock:{fx}:fence", "50"]);
    let lock = client.acquire("fx", LockOptions::new(ms(2000))).await.unwrap();
    // A node whose grant is still in flight (acquire returns at a quorum) has no counter yet: 0.
    let counter =
        |node: &RedisNode| get(node, "fencelock:{fx}:fence").map_or(0, |c| c.parse::<u64>().unwrap());
    assert!(
        lock.fencing_token() >= 51,
        "token {} is not the max over the grants",
        lock.fencing_token()
    );
    let raised = nodes
        .iter()
        .filter(|n| counter(n) >= lock.fencing_token())
        .count();
    assert!(raised >= 2, "counter raised to the token on only {raised} nodes");
    lock.release().await.unwrap();
    // Any later majority issues a larger token, whichever node is missing.
    for (down, node) in nodes.iter().enumerate() {
        node.pause();
        let next = client.acquire("fx", LockOptions::new(ms(2000))).await.unwrap();
        assert!(
            next.fencing_token() > lock.fencing_token(),
            "node {down} down: token went back"
        );
        next.release().await.unwrap();
        node.resume();
        tokio::time::sleep(ms(150)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_strictly_increase_across_clients_while_a_node_restarts() {
    let options = NodeOptions {
        aof: true,
        ..NodeOptions::default()
    };
    let nodes = RedisNode::start_many(5, &options);
    let clients = [client(&nodes).await, client(&nodes).await, client(&nodes).await];
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut workers = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for w in 0..4 {
            let client = client.clone();
            let tx = tx.clone();
            workers.push(tokio::spawn(async move {
                for _ in 0..(1000 / 12 + 1) {
                    let lock = client
                        .acquire("fence:seq", LockOptions::new(ms(2000)).wait(ms(20_000)))
                        .await
                        .unwrap_or_else(|e| panic!("client {c} worker {w}: {e}"));
                    // Grant order = the order in which holders record inside their critical sections.
                    tx.send(lock.fencing_token()).unwrap();
                    let _ = lock.release().await;
                }
            }));
        }
    }
    drop(tx);
    tokio::time::sleep(ms(300)).await;
    tokio::task::block_in_place(|| nodes[2].restart());
    tokio::time::sleep(ms(300)).await;
    tokio::task::block_in_place(|| nodes[4].restart());
    let mut tokens = Vec::new();
    while let Some(token) = rx.recv().await {
        tokens.push(token);
    }
    for worker in workers {
        worker.await.unwrap();
    }
    assert!(tokens.len() >= 1000);
    let inversions = tokens.windows(2).filter(|w| w[0] >= w[1]).count();
    assert_eq!(
        inversions, 0,
        "fencing tokens not strictly increasing in grant order"
    );
}

#[tokio::test]
async fn redlock_error_names_the_nodes() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let client = client(&nodes).await;
    nodes[0].kill();
    nodes[1].kill();
    let err = client
        .acquire("named", LockOptions::new(ms(1000)).wait(ms(0)))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&nodes[0].url()) && text.contains(&nodes[2].url()),
        "{text}"
    );
    assert!(text.contains("majority"), "{text}");
}

/// Five nodes, the last one without a connection yet and frozen: acquire
/// decides on the other four while the request to the last one still waits
/// to be sent. Returns the nodes and a client with generous timeouts.
async fn five_nodes_one_unconnected_and_paused() -> (Vec<RedisNode>, fencelock::Client) {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    nodes[4].kill();
    let client = builder(&nodes)
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .connect_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .expect("a majority is up");
    nodes[4].restart();
    nodes[4].pause();
    (nodes, client)
}

/// A node that can only answer after the quorum granted still gets the
/// lock: the request on its way is not dropped when acquire returns, so the
/// lock sits on every reachable node, not only on the first majority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_still_reaches_a_node_that_answers_after_the_quorum() {
    let (nodes, client) = five_nodes_one_unconnected_and_paused().await;
    let key = lock_key("late-node");
    let lock = client
        .acquire("late-node", LockOptions::new(ms(30_000)))
        .await
        .expect("four nodes are up");
    let token = nodes[..4]
        .iter()
        .find_map(|node| get(node, &key))
        .expect("granted on a live node");
    nodes[4].resume();
    assert!(
        wait_until(ms(4000), || get(&nodes[4], &key).as_deref()
            == Some(token.as_str()))
        .await,
        "the grant never reached the node that answered late"
    );
    lock.release().await.expect("release");
    for node in &nodes {
        assert_eq!(get(node, &key), None, "release left the lock on a node");
    }
}

/// Released before a slow node got the grant: the grant must not land there
/// after the release (which would leave a lock nobody holds until its ttl).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_is_not_overtaken_by_a_grant_still_on_its_way() {
    let (nodes, client) = five_nodes_one_unconnected_and_paused().await;
    let key = lock_key("overtaken");
    let lock = client
        .acquire("overtaken", LockOptions::new(ms(30_000)))
        .await
        .expect("four nodes are up");
    let release = tokio::spawn(async move { lock.release().await });
    tokio::time::sleep(ms(200)).await;
    nodes[4].resume();
    release
        .await
        .expect("release task")
        .expect("released on a majority");
    // Behind a round trip on the client's own connections: anything still
    // queued for the slow node has run by then.
    let clean = wait_until_settled(&client, "overtaken", ms(1000), || {
        nodes.iter().all(|node| get(node, &key).is_none())
    })
    .await;
    assert!(clean, "a grant landed after the release");
    // And it stays clean: nothing arrives later either.
    tokio::time::sleep(ms(300)).await;
    let _ = client.inspect("overtaken").await;
    for node in &nodes {
        assert_eq!(get(node, &key), None, "a grant landed after the release");
    }
}

//! Waiting without polling (docs/protocol.md §4.8): a release wakes one
//! waiter by push, in queue order; lost wake-ups, dead waiters and dead
//! holders cost a bounded pause, never a hang; fair mode admits no barging.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use fencelock::LockOptions;

/// Wake-ups a node has sent (`PUBLISH` calls, scripts' included). Not
/// counted by subscribing: a pattern subscriber counts as a listener and
/// would keep a release from skipping a waiter whose client is gone.
fn wakes(node: &RedisNode) -> u64 {
    node.command_calls("publish")
}

fn options(ttl: u64, wait: u64) -> LockOptions {
    LockOptions::new(ms(ttl)).wait(ms(wait))
}

/// Every `acquire`/`release` request a node ran.
fn script_calls(node: &RedisNode) -> u64 {
    node.command_calls("evalsha") + node.command_calls("eval")
}

/// `waiters` clients queue up behind a holder: [`served_in_order`], a
/// waiter counting as in line once a majority of the nodes queued it. Not
/// every node: one the holder's grant missed (its connection not yet made
/// on a loaded machine) grants each waiter there and never queues it.
async fn queue_up(nodes: &[RedisNode], resource: &str, waiters: usize, fair: bool) -> Vec<usize> {
    let mut clients = Vec::new();
    for _ in 0..=waiters {
        clients.push(client(nodes).await);
    }
    let holder = clients.remove(0);
    let in_line = || {
        let mut lengths: Vec<usize> = nodes.iter().map(|node| queue_len(node, resource)).collect();
        lengths.sort_unstable_by(|a, b| b.cmp(a));
        lengths[nodes.len() / 2]
    };
    served_in_order(holder, clients, resource, fair, in_line).await
}

fn queue_len(node: &RedisNode, resource: &str) -> usize {
    match node.command(&["ZCARD", &queue_keys(resource).0]) {
        redis::Value::Int(n) => n as usize,
        other => panic!("unexpected ZCARD reply {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_one_waiter_in_arrival_order() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let calls_before = script_calls(&nodes[0]);
    let order = queue_up(&nodes, "herd", 10, false).await;
    assert_eq!(order, (0..10).collect::<Vec<_>>(), "grants out of arrival order");
    // Each release with someone waiting wakes exactly one waiter: 10 in all.
    tokio::time::sleep(ms(100)).await;
    assert_eq!(wakes(&nodes[0]), 10, "a release woke more than one waiter");
    // Per grant: the holder's acquire and release, the waiter's first
    // (queuing) attempt and its woken one, and a few refreshes at most; a
    // polling herd makes dozens.
    let calls = script_calls(&nodes[0]) - calls_before;
    assert!(calls <= 11 * 4 + 10, "{calls} script calls for 11 grants");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_waiters_are_served_in_arrival_order_on_three_nodes() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let order = queue_up(&nodes, "fifo3", 8, true).await;
    assert_eq!(order, (0..8).collect::<Vec<_>>(), "grants out of arrival order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_opens_one_subscriber_per_node_once_it_waits() {
    let nodes = RedisNode::start_many(2, &NodeOptions::default());
    let subscribers = |node: &RedisNode| match node.command(&["CLIENT", "LIST", "TYPE", "pubsub"]) {
        redis::Value::BulkString(text) => String::from_utf8(text).unwrap().lines().count(),
        redis::Value::VerbatimString { text, .. } => text.lines().count(),
        other => panic!("unexpected CLIENT LIST reply {other:?}"),
    };
    let (a, b) = (client(&nodes).await, client(&nodes).await);
    let held = a.acquire("subs", options(5_000, 0)).await.unwrap();
    // Granted at once, an acquire that could have waited does not subscribe either.
    b.acquire("free", options(5_000, 5_000))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    assert_eq!(subscribers(&nodes[0]), 0, "a client that never waited subscribed");
    let mut waits = Vec::new();
    for _ in 0..5 {
        let b = b.clone();
        waits.push(tokio::spawn(async move {
            let lock = b.acquire("subs", options(5_000, 5_000)).await.unwrap();
            lock.release().await.unwrap();
        }));
    }
    assert!(
        wait_until(ms(3_000), || subscribers(&nodes[0]) == 1
            && subscribers(&nodes[1]) == 1)
        .await
    );
    held.release().await.unwrap();
    for wait in waits {
        wait.await.unwrap();
    }
    assert_eq!(
        (subscribers(&nodes[0]), subscribers(&nodes[1])),
        (1, 1),
        "five waiters of one client share its subscribers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_wake_up_costs_one_pause_not_the_wait() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let (holder_client, waiter_client) = (client(&nodes).await, client(&nodes).await);
    let holder = holder_client.acquire("lost", options(10_000, 0)).await.unwrap();
    let waiter = tokio::spawn(async move {
        let started = Instant::now();
        let lock = waiter_client.acquire("lost", options(10_000, 8_000)).await;
        (lock, started.elapsed())
    });
    assert!(wait_until(ms(3_000), || queue_len(&nodes[0], "lost") == 1).await);
    // The waiter's subscription dies just before the release: the wake-up
    // goes nowhere and the release skips the waiter.
    nodes[0].command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    let released = Instant::now();
    holder.release().await.unwrap();
    let (lock, _) = waiter.await.unwrap();
    let lock = lock.expect("the waiter got the lock without its wake-up");
    // Its own next attempt came within one refresh pause (1/3 of the
    // waiter lease), far within its 8 s wait.
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "took {:?}",
        released.elapsed()
    );
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holders_expiry_hands_on_without_a_release() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    // A holder that died: its key expires in 600 ms and nobody releases it.
    nodes[0].command(&[
        "SET",
        &lock_key("expiry"),
        "0123456789abcdef0123456789abcdef",
        "PX",
        "600",
    ]);
    let key_set = Instant::now();
    let client = client(&nodes).await;
    let calls_before = script_calls(&nodes[0]);
    let lock = client.acquire("expiry", options(5_000, 5_000)).await.unwrap();
    let granted = key_set.elapsed();
    assert!(
        granted >= ms(600),
        "granted at {granted:?}, before the key expired"
    );
    // The first in line comes back when the key expires (1 ms later plus
    // a round trip), not after a polling interval; allow a loaded machine's slack.
    assert!(
        granted < ms(600 + 250),
        "granted {granted:?} after the key was set"
    );
    let calls = script_calls(&nodes[0]) - calls_before;
    assert!(calls <= 4, "{calls} attempts while waiting 600 ms");
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_skips_a_waiter_whose_client_is_gone() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let (holder_client, waiter_client) = (client(&nodes).await, client(&nodes).await);
    let holder = holder_client.acquire("ghost", options(10_000, 0)).await.unwrap();
    // A waiter of a client that died (no subscriber) sits first in line
    // with a live lease.
    queue_waiter(&nodes[0], "ghost", "ffffffffffffffffffffffffffffffff:1", 1);
    let waiter = tokio::spawn(async move { waiter_client.acquire("ghost", options(10_000, 8_000)).await });
    assert!(wait_until(ms(3_000), || queue_len(&nodes[0], "ghost") == 2).await);
    let released = Instant::now();
    holder.release().await.unwrap();
    let lock = waiter.await.unwrap().unwrap();
    assert_eq!(wakes(&nodes[0]), 2, "the ghost's wake-up, then the live waiter's");
    assert_eq!(queue_len(&nodes[0], "ghost"), 0, "the ghost is out of the queue");
    // Woken by the release, not by its own next attempt a refresh later.
    assert!(released.elapsed() < ms(150), "took {:?}", released.elapsed());
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_mode_admits_no_newcomer_ahead_of_a_waiter() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    // The lock is free, and a live waiter is first in line (its client
    // between attempts, as after a holder's key expired).
    queue_waiter(&nodes[0], "nobarge", "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1", 1);
    let wakes_before = wakes(&nodes[0]);
    let err = client
        .acquire("nobarge", options(5_000, 0).fair(true))
        .await
        .expect_err("a fair newcomer took the lock ahead of the queue");
    assert_eq!(err.kind(), fencelock::ErrorKind::NotAcquired);
    assert_eq!(get(&nodes[0], &lock_key("nobarge")), None);
    // The refusal of a free lock tells the first in line to take it.
    assert_eq!(
        wakes(&nodes[0]) - wakes_before,
        1,
        "the first waiter was not woken"
    );
    // A default acquisition may take a lock that is free when it asks.
    let lock = client.acquire("nobarge", options(5_000, 0)).await.unwrap();
    lock.release().await.unwrap();
}

/// An acquire granted at once costs each node one request, and its release
/// one more: nothing is sent in the background to leave queues it never
/// entered, though it could have waited. Counted per script from each
/// node's `MONITOR` stream. One thing may differ under load: an acquire
/// decided before a slow node answered, and released at once, may never
/// reach that node (the release stops what was not sent yet); that node's
/// fencing counter then lags, and the next grant raises it everywhere
/// (RAISE_FENCE, protocol.md §4.4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_acquire_costs_one_request_per_node() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let client = client(&nodes).await;
    // No renewals: on a loaded machine a cycle can outlast ttl/3, and its
    // renewal (one more script call per node) is not what is counted here.
    let uncontended = || options(5_000, 5_000).auto_renew(false);
    // A first cycle: connections and script caches settle.
    let lock = client.acquire("free", uncontended()).await.unwrap();
    lock.release().await.unwrap();
    let monitors: Vec<ScriptMonitor> = nodes.iter().map(ScriptMonitor::start).collect();
    for _ in 0..20 {
        let lock = client.acquire("free", uncontended()).await.unwrap();
        lock.release().await.unwrap();
    }
    // Late requests land within a round trip; wait for them before counting.
    tokio::time::sleep(ms(200)).await;
    let [acquire, release, raise] = ["ACQUIRE", "RELEASE", "RAISE_FENCE"].map(script_sha);
    let mut acquires = 0;
    for (i, monitor) in monitors.into_iter().enumerate() {
        let scripts = monitor.stop();
        let count = |sha: &str| scripts.iter().filter(|s| *s == sha).count();
        let others: Vec<&String> = scripts
            .iter()
            .filter(|s| ![acquire, release, raise].contains(&s.as_str()))
            .collect();
        assert!(others.is_empty(), "node {i} ran other scripts: {others:?}");
        assert_eq!(count(release), 20, "releases on node {i}");
        // Never more than one request per acquire; a few fewer when a busy
        // machine delays one node (CI once saw 17 of 20 reach a node, and two
        // RAISE_FENCE after), never a node left out.
        assert!(
            (15..=20).contains(&count(acquire)),
            "acquires on node {i}: {scripts:?}"
        );
        acquires += count(acquire);
    }
    assert!(
        acquires >= 90,
        "{acquires} acquire requests for 20 acquires on 5 nodes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_release_skips_the_queue_upkeep() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let uncontended = || options(5_000, 5_000).auto_renew(false);
    let lock = client.acquire("alone", uncontended()).await.unwrap();
    lock.release().await.unwrap();
    let calls = |name: &str| nodes[0].command_calls(name);
    let before = ["time", "zrangebyscore", "zrange", "exists", "del"].map(calls);
    for _ in 0..20 {
        let lock = client.acquire("alone", uncontended()).await.unwrap();
        lock.release().await.unwrap();
    }
    let after = ["time", "zrangebyscore", "zrange", "exists", "del"].map(calls);
    let ran: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    // Nobody ever queued: each release checks that the queue key is
    // absent and deletes the lock key, with no clock or queue reads.
    assert_eq!(ran, [0, 0, 0, 20, 20], "time, zrangebyscore, zrange, exists, del");
}

/// The SHA1 of every `EVALSHA` a node runs while it watches (`MONITOR` on
/// its own connection, read on its own thread).
struct ScriptMonitor {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<String>>,
}

impl ScriptMonitor {
    fn start(node: &RedisNode) -> ScriptMonitor {
        let mut connection = node.connection();
        redis::cmd("MONITOR").exec(&mut connection).unwrap();
        connection.set_read_timeout(Some(ms(50))).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut shas = Vec::new();
            while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
                let Ok(redis::Value::SimpleString(line)) = connection.recv_response() else {
                    continue;
                };
                if let Some((_, rest)) = line.split_once("\"EVALSHA\" \"") {
                    shas.push(rest.chars().take(40).collect());
                }
            }
            shas
        });
        ScriptMonitor { stop, thread }
    }

    fn stop(self) -> Vec<String> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// Herd-free and fair in Redlock mode: with every worker cycling on one
/// lock, each grant costs every node about three requests (the waiter's
/// queuing attempt, its woken attempt, the release) and one wake-up, not
/// a poll per waiter, and the releaser does not keep re-taking the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_on_five_nodes_cost_a_few_requests_per_grant() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let calls_before: u64 = nodes.iter().map(script_calls).sum();
    // Who held the lock, grant after grant (the lock orders them).
    let holders = Arc::new(Mutex::new(Vec::new()));
    // Every client is connected before any works: a worker alone meanwhile
    // would take the lock again and again with nobody waiting.
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(client(&nodes).await);
    }
    let end = Instant::now() + ms(1500);
    let mut tasks = Vec::new();
    for (worker, client) in clients.into_iter().enumerate() {
        let holders = holders.clone();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                let lock = client.acquire("cycle", options(10_000, 5_000)).await.unwrap();
                holders.lock().unwrap().push(worker);
                tokio::time::sleep(ms(1)).await;
                lock.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let holders = holders.lock().unwrap().clone();
    let each: Vec<usize> = (0..8)
        .map(|w| holders.iter().filter(|&&h| h == w).count())
        .collect();
    assert!(
        each.iter().all(|&n| n > 0),
        "grants per worker {each:?}: a worker starved"
    );
    // A looping holder takes the lock back at most MAX_RETAKES times in a
    // row before its release hands it to the next waiter (protocol.md §4.9),
    // so a count ratio between workers would fail on a short run's luck.
    let longest_run = holders
        .chunk_by(|a, b| a == b)
        .map(<[usize]>::len)
        .max()
        .unwrap_or(0);
    assert!(
        longest_run <= fencelock::MAX_RETAKES as usize + 1,
        "one worker held the lock {longest_run} times in a row: the releasers kept it"
    );
    let grants = holders.len() as f64;
    let calls: u64 = nodes.iter().map(script_calls).sum::<u64>() - calls_before;
    let per_node = calls as f64 / grants / 5.0;
    let wakes_per_node = nodes.iter().map(wakes).sum::<u64>() as f64 / grants / 5.0;
    assert!(grants >= 100.0, "only {grants} grants in 1.5 s");
    assert!(per_node <= 6.0, "{per_node:.1} requests per node per grant");
    assert!(
        wakes_per_node <= 1.5,
        "{wakes_per_node:.2} wake-ups per node per grant"
    );
}

/// A waiter granted before a slow node answered, and released at once,
/// still leaves that node's queue: its attempt there queued it (the node
/// refused), and a waiter left behind would sit first in line and be handed
/// the lock on every release there until its lease ran out. Seen failing
/// before the fix: the entry stayed until the queue itself expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_granted_before_a_slow_node_answered_leaves_its_queue_there() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let proxy = FaultProxy::start(nodes[2].port());
    let waiter_client = fencelock::Client::builder()
        .nodes([nodes[0].url(), nodes[1].url(), proxy.url()])
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .unwrap();
    // Generous like the waiter's: its release must not time out on a loaded machine.
    let holder_client = builder(&nodes)
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .unwrap();
    // On every node: the test takes the slow node's key over below, so a
    // grant that missed another node (its connection not yet made on a
    // loaded machine) would leave the holder without a majority.
    let holder = acquire_everywhere(&holder_client, &nodes, "slow", options(10_000, 0)).await;
    let name = holder.resource().to_owned();
    let waiter = tokio::spawn({
        let name = name.clone();
        async move {
            let lock = waiter_client
                .acquire(&name, options(10_000, 8_000))
                .await
                .unwrap();
            // Released at once: before the slow node's answer to the winning attempt.
            lock.release().await.unwrap();
            waiter_client
        }
    });
    assert!(wait_until(ms(3_000), || queue_len(&nodes[2], &name) == 1).await);
    // The slow node keeps refusing: another owner holds the key there.
    nodes[2].command(&["SET", &lock_key(&name), "someone-else", "PX", "10000"]);
    proxy.set(Mode::Delay {
        each_way: ms(150),
        jitter: Duration::ZERO,
    });
    holder.release().await.unwrap();
    let _waiter_client = waiter.await.unwrap();
    assert!(
        wait_until(ms(600), || queue_len(&nodes[2], &name) == 0).await,
        "the waiter is still queued on the slow node"
    );
}

/// A release whose nodes hand the lock to different waiters (their queues
/// differ: one node has another waiter first, another lost this waiter's
/// place) leaves no waiter with a quorum of hand-offs. The waiter handed it
/// by too few nodes tries once a short grace has passed, instead of
/// sleeping until its next refresh while the reservations sit unused, and
/// wins with the node where the key was freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_handed_the_lock_by_too_few_nodes_tries_soon() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let (holder_client, waiter_client) = (client(&nodes).await, client(&nodes).await);
    let holder = holder_client.acquire("split", options(10_000, 0)).await.unwrap();
    let waiter = tokio::spawn(async move { waiter_client.acquire("split", options(10_000, 8_000)).await });
    assert!(
        wait_until(ms(3_000), || nodes
            .iter()
            .all(|node| queue_len(node, "split") == 1))
        .await
    );
    // Node 0: a waiter of a live client is first in line, so node 0 hands
    // the lock to it (its channel has a listener: a plain subscriber here).
    let other = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1";
    let mut listener = nodes[0].connection();
    let mut listening = listener.as_pubsub();
    listening
        .subscribe(format!("fencelock:wake:{}", &other[..32]))
        .unwrap();
    queue_waiter(&nodes[0], "split", other, 0);
    // Node 2: this waiter's place is gone, so the release frees the key there.
    let (queue, leases) = queue_keys("split");
    nodes[2].command(&["DEL", &queue, &leases]);
    let released = Instant::now();
    holder.release().await.unwrap();
    let lock = waiter.await.unwrap().expect("the waiter got the lock");
    let took = released.elapsed();
    assert_eq!(
        get(&nodes[0], &lock_key("split")),
        Some(format!("w:{other}")),
        "node 0 handed the lock to the other waiter"
    );
    // Not at its next refresh (a sixth to a third of the 1 s waiter lease
    // after its last attempt, just before the release).
    assert!(took < ms(100), "took {took:?}");
    lock.release().await.unwrap();
}

/// Three waiters each handed one release by one node of three (each node
/// has another first in line): each tries after the grace, is refused by
/// the two nodes reserved for the others, and undoes its grant, which
/// frees its node and wakes nobody. Each comes back as after a split vote,
/// so one of them wins on the freed nodes at once, not when the
/// reservations that refused them would have run out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_each_handed_one_release_by_one_node_are_served_at_once() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let holder_client = client(&nodes).await;
    let holder = holder_client.acquire("split3", options(10_000, 0)).await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let waiter_client = client(&nodes).await;
        waiters.push(tokio::spawn(async move {
            let lock = waiter_client.acquire("split3", options(10_000, 8_000)).await;
            let granted = Instant::now();
            lock.expect("the waiter got the lock").release().await.unwrap();
            granted
        }));
    }
    assert!(
        wait_until(ms(3_000), || nodes
            .iter()
            .all(|node| queue_len(node, "split3") == 3))
        .await
    );
    let (queue, _) = queue_keys("split3");
    let members = members(&nodes[0], &queue);
    // Node i puts waiter i first: the release reserves each node for a
    // different waiter.
    for (node, member) in nodes.iter().zip(&members) {
        node.command(&["ZADD", &queue, "0", member]);
    }
    let released = Instant::now();
    holder.release().await.unwrap();
    let mut granted = Vec::new();
    for waiter in waiters {
        granted.push(waiter.await.unwrap());
    }
    let took = granted.into_iter().min().unwrap() - released;
    // Not once the reservations that refused the tries would have run out
    // (the hand-off window, 200 ms).
    assert!(took < ms(100), "the first waiter was served after {took:?}");
}

/// A waiter that gives up has left every queue when `acquire` reports the
/// timeout, so a release the caller makes next is not handed to it (which
/// would hold the lock from the others until its leave arrived). Before the
/// fix the leave only went out in the background: the timeout came back
/// while the nodes still queued the waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_waiter_is_out_of_every_queue_when_acquire_returns() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let (holder, waiter) = (client(&nodes).await, client(&nodes).await);
    for (resource, fair) in [("gaveup", false), ("gaveup-fair", true)] {
        let lock = holder.acquire(resource, options(10_000, 0)).await.unwrap();
        for _ in 0..5 {
            let err = waiter
                .acquire(resource, options(10_000, 150).fair(fair))
                .await
                .expect_err("the held lock was granted");
            assert_eq!(err.kind(), fencelock::ErrorKind::Timeout);
            for (i, node) in nodes.iter().enumerate() {
                assert_eq!(
                    queue_len(node, resource),
                    0,
                    "still queued on node {i} (fair: {fair})"
                );
            }
        }
        lock.release().await.unwrap();
    }
}

/// A waiter whose LEAVE did not reach a node (here it is put back first in
/// that node's line, with a lease that never ends, right after it gave up)
/// is handed the next release there. Its client, woken for a waiter that no
/// longer waits, sends that node the leave again, which hands the lock on
/// to the next waiter at once, instead of leaving it reserved and unused
/// for the whole hand-off window (10 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_woken_after_it_left_leaves_that_node_again() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    // The hand-off window is twice the releasing client's per-node timeout.
    let holder_client = builder(&nodes)
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .unwrap();
    let holder = holder_client
        .acquire("lost-leave", options(20_000, 0))
        .await
        .unwrap();
    let gone_client = client(&nodes).await;
    let gone = tokio::spawn(async move {
        let gave_up = gone_client.acquire("lost-leave", options(10_000, 1_500)).await;
        (gave_up.map(|_| ()), gone_client)
    });
    assert!(wait_until(ms(3_000), || queue_len(&nodes[0], "lost-leave") == 1).await);
    let gone_id = members(&nodes[0], &queue_keys("lost-leave").0)[0].clone();
    let next_client = client(&nodes).await;
    let next = tokio::spawn(async move {
        let lock = next_client.acquire("lost-leave", options(10_000, 15_000)).await;
        lock.map(|lock| (lock, next_client))
    });
    assert!(wait_until(ms(3_000), || queue_len(&nodes[0], "lost-leave") == 2).await);
    let (gave_up, _gone_client) = gone.await.unwrap();
    assert_eq!(gave_up.unwrap_err().kind(), fencelock::ErrorKind::Timeout);
    queue_waiter(&nodes[0], "lost-leave", &gone_id, 0);
    let released = Instant::now();
    holder.release().await.unwrap();
    let (lock, _next_client) = next.await.unwrap().expect("the next waiter got the lock");
    let took = released.elapsed();
    assert!(
        took < ms(3_000),
        "the lock sat reserved for the waiter that had left for {took:?}"
    );
    assert_eq!(
        queue_len(&nodes[0], "lost-leave"),
        0,
        "the waiter that left is still queued"
    );
    lock.release().await.unwrap();
}

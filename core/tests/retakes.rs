//! Re-takes (docs/protocol.md §4.9): the holder of a contended lock or
//! permit that asks for it again at once takes it back without waking the
//! next waiter, at most `MAX_RETAKES` times in a row, on one node or many;
//! one that does not come back hands it on within a moment, not at the
//! waiter's next refresh.

mod common;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Waker};
use std::time::Instant;

use common::*;
use fencelock::{Client, Lock, LockOptions, MAX_RETAKES};

fn options(wait: u64) -> LockOptions {
    LockOptions::new(ms(10_000)).wait(ms(wait))
}

/// Wake-ups the nodes sent (`PUBLISH`, scripts' included).
fn wakes(nodes: &[RedisNode]) -> u64 {
    nodes.iter().map(|node| node.command_calls("publish")).sum()
}

/// Whether `resource` is held on a majority of the nodes and its queue
/// holds one waiter on each of them. Not on every node: a grant decided
/// by a majority may never land on the rest (the holder's attempt reached
/// a node before the last holder's release did, and left its queue), and
/// there the waiter is granted, not queued, and undoes it.
fn queued_where_held(nodes: &[RedisNode], resource: &str) -> bool {
    let held: Vec<&RedisNode> = nodes
        .iter()
        .filter(|node| get(node, &lock_key(resource)).is_some())
        .collect();
    held.len() * 2 > nodes.len()
        && held.iter().all(|node| {
            node.command(&["ZCARD", &format!("{}:queue", lock_key(resource))]) == redis::Value::Int(1)
        })
}

/// `a`'s grant of `resource` after waiting behind another client: a
/// contended grant, whose release counts as a loop's.
async fn waited_for(nodes: &[RedisNode], a: &Client, resource: &str, fair: bool) -> Lock {
    let other = client(nodes).await;
    let held = other.acquire(resource, options(0).fair(fair)).await.unwrap();
    let a_waits = {
        let (a, name) = (a.clone(), resource.to_owned());
        tokio::spawn(async move { a.acquire(&name, options(10_000).fair(fair)).await.unwrap() })
    };
    assert!(wait_until(ms(5_000), || queued_where_held(nodes, resource)).await);
    held.release().await.unwrap();
    a_waits.await.unwrap()
}

/// Client `a` loops on `resource`: it holds it, releases it to a waiter
/// and asks for it again at once, so it waits and is handed it back (a
/// contended grant, asked for right after a release). Then a third client
/// waits behind it. Returns `a`'s lock and the third one's task, which sets
/// its flag once granted and returns its lock (held until the test lets go).
async fn contended(
    nodes: &[RedisNode],
    a: &Client,
    resource: &str,
    fair: bool,
) -> (Lock, Arc<AtomicBool>, tokio::task::JoinHandle<Lock>) {
    let first = waited_for(nodes, a, resource, fair).await;
    let (b, name) = (client(nodes).await, resource.to_owned());
    let in_between = tokio::spawn(async move {
        let lock = b.acquire(&name, options(10_000).fair(fair)).await.unwrap();
        // Until `a` waits behind it.
        tokio::time::sleep(ms(50)).await;
        lock.release().await.unwrap();
    });
    assert!(wait_until(ms(5_000), || queued_where_held(nodes, resource)).await);
    first.release().await.unwrap();
    let lock = a.acquire(resource, options(10_000).fair(fair)).await.unwrap();
    in_between.await.unwrap();
    let (granted, waiter) = (Arc::new(AtomicBool::new(false)), client(nodes).await);
    let (flag, name) = (granted.clone(), resource.to_owned());
    let task = tokio::spawn(async move {
        let lock = waiter.acquire(&name, options(20_000).fair(fair)).await.unwrap();
        flag.store(true, Ordering::SeqCst);
        lock
    });
    assert!(wait_until(ms(5_000), || queued_where_held(nodes, resource)).await);
    (lock, granted, task)
}

/// A holder of `resource` on `node_count` nodes takes it back `MAX_RETAKES`
/// times in a row while a waiter waits, then hands it to the waiter. With
/// `rival`, another client keeps trying for the lock meanwhile: a lingering
/// release reserves the key for its holder, so no attempt of another can
/// take it on some nodes and split a re-take. Returns the script calls each
/// node ran during the re-takes.
async fn retakes_until_they_run_out(nodes: &[RedisNode], resource: &str, rival: bool) -> Vec<u64> {
    let a = client(nodes).await;
    let (lock, waiter_granted, waiter) = contended(nodes, &a, resource, false).await;
    let stop = Arc::new(AtomicBool::new(false));
    let c = client(nodes).await;
    let rival = rival.then(|| {
        let (stop, name) = (stop.clone(), resource.to_owned());
        tokio::spawn(async move {
            let mut tries = 0u32;
            while !stop.load(Ordering::SeqCst) {
                if let Some(lock) = c.try_acquire(&name, options(0)).await.unwrap() {
                    panic!(
                        "another client took a lingering lock (token {})",
                        lock.fencing_token()
                    );
                }
                tries += 1;
            }
            tries
        })
    });
    let (wakes_before, scripts_before) = (wakes(nodes), script_calls(nodes));
    let lock = retake_until_the_last(&a, resource, lock, &waiter_granted).await;
    let scripts: Vec<u64> = script_calls(nodes)
        .iter()
        .zip(scripts_before)
        .map(|(after, before)| after - before)
        .collect();
    assert_eq!(wakes(nodes), wakes_before, "a re-take woke a waiter");
    stop.store(true, Ordering::SeqCst);
    if let Some(rival) = rival {
        assert!(rival.await.unwrap() > 0, "the rival never tried");
    }
    // The last re-take's release hands the lock to the waiter.
    lock.release().await.unwrap();
    assert!(
        a.try_acquire(resource, options(0)).await.unwrap().is_none(),
        "a re-take beyond the bound"
    );
    let held = tokio::time::timeout(ms(5_000), waiter).await.unwrap().unwrap();
    held.release().await.unwrap();
    assert!(waiter_granted.load(Ordering::SeqCst));
    scripts
}

/// The script calls (`EVALSHA` and `EVAL`) each node ran so far.
fn script_calls(nodes: &[RedisNode]) -> Vec<u64> {
    nodes
        .iter()
        .map(|node| node.command_calls("evalsha") + node.command_calls("eval"))
        .collect()
}

/// A `valkey-server` with `SET … IFEQ`, or `None` after printing why the
/// test that asked is skipped.
fn valkey_or_skip() -> Option<std::path::PathBuf> {
    fencelock_harness::valkey_server_path()
        .map_err(|why| eprintln!("SKIPPED: {why}"))
        .ok()
}

/// `count` nodes of a server with `SET … IFEQ`, or `None` after printing why
/// the test is skipped.
fn valkey_nodes(count: usize) -> Option<Vec<RedisNode>> {
    valkey_or_skip().map(|server| RedisNode::start_many(count, &valkey_options(server)))
}

fn valkey_options(server: std::path::PathBuf) -> NodeOptions {
    NodeOptions {
        server: Some(server),
        ..NodeOptions::default()
    }
}

/// Fewer script calls than re-takes: with the scripts each re-take is two
/// (the lingering RELEASE and the adopting ACQUIRE), and the waiter's
/// refreshes add a few.
fn ran_by_plain_commands(scripts: u64) -> bool {
    scripts < u64::from(MAX_RETAKES)
}

/// Whether `node` answers `SET … IFEQ` with an error (Redis before 8.4).
fn lacks_ifeq(node: &RedisNode) -> bool {
    let mut probe = redis::cmd("SET");
    probe.arg("ifeq-check").arg("1").arg("IFEQ").arg("0");
    probe.query::<redis::Value>(&mut node.connection()).is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_comes_back_takes_the_lock_back_until_its_retakes_run_out() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    retakes_until_they_run_out(&nodes, "again", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_three_nodes_a_holder_takes_the_lock_back_while_another_client_keeps_trying() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    retakes_until_they_run_out(&nodes, "three", true).await;
}

/// Where nodes have `SET … IFEQ` (docs/protocol.md §3.18) a re-take runs no
/// script: the lingering release is one `SET`, the re-take an `INCR` and a
/// `SET`; tokens still rise, and the waiter is served after the last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_valkey_a_holder_takes_the_lock_back_by_plain_commands() {
    let Some(nodes) = valkey_nodes(1) else { return };
    let scripts = retakes_until_they_run_out(&nodes, "plain", false).await;
    assert!(
        ran_by_plain_commands(scripts[0]),
        "{scripts:?} script calls for {MAX_RETAKES} re-takes"
    );
}

/// As on Redis 7 (`on_three_nodes_…`), on three Valkey nodes: the rival
/// never takes a lingering lock when the re-takes go by `SET … IFEQ`. (That
/// they do on several nodes is counted by the mixed test below, which has no
/// rival: the rival's attempts and the waiter's refreshes they slow down
/// would blur the count here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_three_valkey_nodes_a_rival_never_takes_a_lingering_lock() {
    let Some(nodes) = valkey_nodes(3) else { return };
    retakes_until_they_run_out(&nodes, "plain-three", true).await;
}

/// A node without `IFEQ` (Redis 7) among nodes that have it: it answers the
/// client's probe with a syntax error, once, and runs the scripts from then
/// on, and the re-takes go on as everywhere else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_ifeq_runs_the_scripts_among_nodes_that_have_it() {
    let Some(valkey) = valkey_or_skip() else { return };
    let options = [
        valkey_options(valkey.clone()),
        valkey_options(valkey),
        NodeOptions::default(),
    ];
    let nodes = RedisNode::start_each(&options);
    if !lacks_ifeq(&nodes[2]) {
        eprintln!("SKIPPED: the redis-server on PATH has SET … IFEQ (Redis 8.4 or later)");
        return;
    }
    let probes_before = failed_sets(&nodes[2]);
    let scripts = retakes_until_they_run_out(&nodes, "mixed", false).await;
    assert!(
        ran_by_plain_commands(scripts[0]) && ran_by_plain_commands(scripts[1]),
        "{scripts:?} script calls for {MAX_RETAKES} re-takes"
    );
    assert!(
        scripts[2] >= 2 * u64::from(MAX_RETAKES),
        "{scripts:?}: the Redis 7 node ran the re-takes' scripts"
    );
    // The looping client's probe, and one more for each call it sent there
    // before the first probe's answer came (its release was decided by the
    // other two nodes); not one per re-take.
    let probes = failed_sets(&nodes[2]) - probes_before;
    assert!(
        probes >= 1 && probes < u64::from(MAX_RETAKES),
        "{probes} probes answered with a syntax error"
    );
}

/// The `SET`s a node refused (`failed_calls` in `INFO commandstats`): here
/// the probes of `SET … IFEQ` on a node without it.
fn failed_sets(node: &RedisNode) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut node.connection())
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_set:"))
        .and_then(|stats| {
            stats
                .split(',')
                .find_map(|field| field.strip_prefix("failed_calls="))
        })
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// How soon after its release a client's acquire adopts the lingering
/// release (`LINGER` in core/src/linger.rs).
const LINGER: std::time::Duration = std::time::Duration::from_millis(10);

/// A re-take whose reservation is gone when it lands (deleted here between
/// the release and the re-take): the `SET … IFEQ` sets nothing, and the
/// ACQUIRE script that follows takes the free key. Its token is two above
/// the last: the shortcut's `INCR` only skipped one. The waiter behind is
/// sent away first, so that no refresh of its takes the free key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_valkey_a_retake_that_finds_no_reservation_runs_the_script() {
    let Some(nodes) = valkey_nodes(1) else { return };
    let a = client(&nodes).await;
    let (lock, _, waiter) = contended(&nodes, &a, "gone-reservation", false).await;
    waiter.abort();
    let (queue, _) = queue_keys("gone-reservation");
    let empty = || nodes[0].command(&["ZCARD", &queue]) == redis::Value::Int(0);
    assert!(wait_until(ms(5_000), empty).await, "the waiter left");
    let mut connection = nodes[0].connection();
    let (token, key) = (lock.fencing_token(), lock_key("gone-reservation"));
    // A lingering release on Valkey runs no script: what is counted from
    // here on is the re-take's.
    let scripts_before = script_calls(&nodes)[0];
    lock.release().await.unwrap();
    let released = Instant::now();
    let () = redis::cmd("DEL").arg(&key).query(&mut connection).unwrap();
    let again = a.try_acquire("gone-reservation", options(0));
    if released.elapsed() >= LINGER {
        eprintln!(
            "SKIPPED: the re-take began {:?} after the release, too late to adopt it",
            released.elapsed()
        );
        return;
    }
    let again = again.await.unwrap().expect("the key was free");
    assert_eq!(
        again.fencing_token(),
        token + 2,
        "a re-take that missed, then the script"
    );
    assert!(
        script_calls(&nodes)[0] > scripts_before,
        "the ACQUIRE script decided"
    );
    again.release().await.unwrap();
}

/// A lingering release of a lock that is no longer ours: the key held by
/// another owner, or gone. Returns the release's error and what the key
/// holds afterwards, for each case.
async fn lingering_release_of_a_lost_lock(
    nodes: &[RedisNode],
) -> Vec<(fencelock::ErrorKind, Option<String>)> {
    let mut outcomes = Vec::new();
    for (resource, other) in [("lost-to-other", Some("someone-else")), ("lost-absent", None)] {
        let a = client(nodes).await;
        let (lock, _, waiter) = contended(nodes, &a, resource, false).await;
        let key = lock_key(resource);
        match other {
            Some(value) => nodes[0].command(&["SET", &key, value]),
            None => nodes[0].command(&["DEL", &key]),
        };
        let error = lock.release().await.expect_err("the lock was lost");
        outcomes.push((error.kind(), get(&nodes[0], &key)));
        waiter.abort();
    }
    outcomes
}

/// The shortcut of a lingering release answers as its script: a lock taken
/// over is reported lost and the other owner's key stays as it was; a key
/// that is gone is not made a reservation. (Which of 0 and -1 the shortcut
/// read is checked by `set_if_equal`'s unit tests: both report `NotHeld`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lingering_release_of_a_lost_lock_answers_alike_with_ifeq_and_scripts() {
    let Some(valkey) = valkey_nodes(1) else { return };
    let redis = RedisNode::start_many(1, &NodeOptions::default());
    let with_scripts = lingering_release_of_a_lost_lock(&redis).await;
    let with_ifeq = lingering_release_of_a_lost_lock(&valkey).await;
    let expected = vec![
        (fencelock::ErrorKind::NotHeld, Some("someone-else".to_owned())),
        (fencelock::ErrorKind::NotHeld, None),
    ];
    assert_eq!(with_scripts, expected);
    assert_eq!(with_ifeq, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_does_not_come_back_hands_on_at_once() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let a = client(&nodes).await;
    let (lock, waiter_granted, waiter) = contended(&nodes, &a, "gone", false).await;
    let other = client(&nodes).await;
    // The linger lasts 10 ms: what the node holds right after the release is
    // read in one round trip, on a connection opened before it.
    let mut connection = nodes[0].connection();
    let wakes_before = wakes(&nodes);
    let released = Instant::now();
    lock.release().await.unwrap();
    let (key, left, stats): (Option<String>, i64, String) = redis::pipe()
        .atomic()
        .cmd("GET")
        .arg(lock_key("gone"))
        .cmd("PTTL")
        .arg(lock_key("gone"))
        .cmd("INFO")
        .arg("commandstats")
        .query(&mut connection)
        .unwrap();
    // Released on the node when `release` returns, as any release is, and
    // reserved for this client's next acquire: no other client may take it.
    let key = key.expect("a reservation");
    assert!(key.starts_with("w:"), "the key is {key}");
    // A reservation whose hand-on never lands blocks others only briefly.
    assert!(left > 0 && left <= 100, "the reservation has {left} ms to run");
    assert_eq!(
        fencelock_harness::command_calls_in(&stats, "publish"),
        wakes_before,
        "the release lingered, waking nobody yet"
    );
    assert!(other.try_acquire("gone", options(0)).await.unwrap().is_none());
    let held = tokio::time::timeout(ms(5_000), waiter).await.unwrap().unwrap();
    // Woken by the hand-on, not by its own next attempt a refresh (at least
    // a sixth of the 1 s waiter lease) later.
    assert!(released.elapsed() < ms(150), "took {:?}", released.elapsed());
    held.release().await.unwrap();
    assert!(waiter_granted.load(Ordering::SeqCst));
    assert_eq!(wakes(&nodes) - wakes_before, 1, "one wake-up, for the waiter");
}

/// A lingering release whose caller stops waiting after its first poll (a
/// timeout around it, or a front's cancel) still goes through and hands the
/// lock on within a moment. Before the fix the dropped release stopped
/// where it was: the lock stayed held until its ttl when the RELEASE had not
/// gone out yet, and when it had, the reservation was never handed on (it
/// was noted only once the nodes answered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lingering_release_dropped_on_its_way_still_hands_on() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let a = client(&nodes).await;
    let (lock, waiter_granted, waiter) = contended(&nodes, &a, "dropped", false).await;
    let wakes_before = wakes(&nodes);
    // Polled once (the RELEASE may or may not be on its way), then dropped.
    let mut release = Box::pin(lock.release());
    let polled = release.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    assert!(polled.is_pending(), "the release ended in its first poll");
    drop(release);
    let held = tokio::time::timeout(ms(5_000), waiter).await.unwrap().unwrap();
    assert!(waiter_granted.load(Ordering::SeqCst));
    assert_eq!(
        wakes(&nodes) - wakes_before,
        1,
        "the waiter was not woken by a hand-on of the reservation"
    );
    held.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_does_not_loop_hands_off_in_its_release() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let (first, a) = (client(&nodes).await, client(&nodes).await);
    let held = first.acquire("once", options(0)).await.unwrap();
    let a_waits = {
        let a = a.clone();
        tokio::spawn(async move { a.acquire("once", options(10_000)).await.unwrap() })
    };
    assert!(wait_until(ms(5_000), || queued_where_held(&nodes, "once")).await);
    held.release().await.unwrap();
    // A waited for it, but had not just released it: a one-off holder.
    let lock = a_waits.await.unwrap();
    let waiter = {
        let c = client(&nodes).await;
        tokio::spawn(async move {
            c.acquire("once", options(10_000))
                .await
                .unwrap()
                .release()
                .await
                .unwrap()
        })
    };
    assert!(wait_until(ms(5_000), || queued_where_held(&nodes, "once")).await);
    let wakes_before = wakes(&nodes);
    lock.release().await.unwrap();
    assert_eq!(
        wakes(&nodes) - wakes_before,
        1,
        "the release itself woke the waiter"
    );
    tokio::time::timeout(ms(5_000), waiter).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_client_hands_a_lingering_lock_on() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let a = client(&nodes).await;
    let (lock, _, waiter) = contended(&nodes, &a, "closing", false).await;
    lock.release().await.unwrap();
    a.close();
    a.settle().await;
    let held = tokio::time::timeout(ms(5_000), waiter).await.unwrap().unwrap();
    held.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_mode_never_takes_a_lock_back_ahead_of_a_waiter() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let a = client(&nodes).await;
    let (lock, _, waiter) = contended(&nodes, &a, "fair", true).await;
    lock.release().await.unwrap();
    let again = a.try_acquire("fair", options(0).fair(true)).await.unwrap();
    assert!(again.is_none(), "fair mode let the holder take the lock back");
    let held = tokio::time::timeout(ms(5_000), waiter).await.unwrap().unwrap();
    held.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_acquire_does_not_take_back_a_lingering_release_ahead_of_a_waiter() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let a = client(&nodes).await;
    // The loop's grants are in the default mode, so its release lingers.
    let (lock, _, waiter) = contended(&nodes, &a, "mixed", false).await;
    lock.release().await.unwrap();
    let again = a.try_acquire("mixed", options(0).fair(true)).await.unwrap();
    assert!(again.is_none(), "a fair acquire took the lock back");
    let held = tokio::time::timeout(ms(5_000), waiter).await.unwrap().unwrap();
    held.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_holder_that_comes_back_takes_its_permit_back() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    permit_retakes(&nodes).await;
}

/// On Valkey the permit's lingering release is one `SET` (the re-take is
/// still SEM_ACQUIRE): one script call per re-take, not two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_valkey_a_permit_holder_takes_its_permit_back_with_half_the_scripts() {
    let Some(nodes) = valkey_nodes(1) else { return };
    let scripts = permit_retakes(&nodes).await;
    assert!(
        scripts < 2 * u64::from(MAX_RETAKES),
        "{scripts} script calls for {MAX_RETAKES} re-takes"
    );
}

/// A semaphore of one permit on `nodes` (one node): a holder that loops
/// takes its permit back `MAX_RETAKES` times, then the waiter behind it is
/// served. Returns the script calls the node ran during the re-takes.
async fn permit_retakes(nodes: &[RedisNode]) -> u64 {
    let (a, b) = (client(nodes).await, client(nodes).await);
    let (a_sem, b_sem) = (a.semaphore("pool", 1).unwrap(), b.semaphore("pool", 1).unwrap());
    let queue = format!("{}:sem:queue", lock_key("pool"));
    let queued = || nodes[0].command(&["ZCARD", &queue]) == redis::Value::Int(1);
    // A loops: it holds the one permit, lets a waiter have it, and asks again at once.
    // Its first permit after waiting (a contended grant).
    let other = client(nodes).await.semaphore("pool", 1).unwrap();
    let held = other.acquire(options(0)).await.unwrap();
    let a_first = {
        let a_sem = a_sem.clone();
        tokio::spawn(async move { a_sem.acquire(options(10_000)).await.unwrap() })
    };
    assert!(wait_until(ms(5_000), queued).await);
    held.release().await.unwrap();
    let first = a_first.await.unwrap();
    let in_between = {
        let b_sem = b_sem.clone();
        tokio::spawn(async move {
            let permit = b_sem.acquire(options(10_000)).await.unwrap();
            tokio::time::sleep(ms(50)).await;
            permit.release().await.unwrap();
        })
    };
    assert!(wait_until(ms(5_000), queued).await);
    first.release().await.unwrap();
    let mut permit = a_sem.acquire(options(10_000)).await.unwrap();
    in_between.await.unwrap();
    let granted = Arc::new(AtomicBool::new(false));
    let flag = granted.clone();
    let waiter = tokio::spawn(async move {
        let permit = b_sem.acquire(options(20_000)).await.unwrap();
        flag.store(true, Ordering::SeqCst);
        permit
    });
    assert!(wait_until(ms(5_000), queued).await);
    let scripts_before = script_calls(nodes)[0];
    for retake in 1..=MAX_RETAKES {
        let token = permit.fencing_token();
        permit.release().await.unwrap();
        permit = a_sem
            .try_acquire(options(0))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("re-take {retake} of the permit refused"));
        assert!(permit.fencing_token() > token);
        assert!(
            !granted.load(Ordering::SeqCst),
            "the waiter got the permit during re-take {retake}"
        );
    }
    let scripts = script_calls(nodes)[0] - scripts_before;
    permit.release().await.unwrap();
    assert!(
        a_sem.try_acquire(options(0)).await.unwrap().is_none(),
        "a re-take beyond the bound"
    );
    let held = tokio::time::timeout(ms(5_000), waiter).await.unwrap().unwrap();
    held.release().await.unwrap();
    scripts
}

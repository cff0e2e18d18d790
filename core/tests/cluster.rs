//! A Redis Cluster addressed as one node, waited on (docs/protocol.md §4.9):
//! a release wakes one waiter by push, in arrival order; fair mode admits
//! no barging; a looping holder takes the lock back; a lost wake-up or a
//! dead waiter first in line costs a bounded pause, never a hang; a
//! semaphore keeps its bound and observers follow an election by push.
//!
//! On a Cluster the lock's keys live on the shard that owns their slot,
//! while a client subscribes on the node it was given: the wake-up crosses
//! the cluster bus. And PUBLISH counts only the subscribers of the shard
//! that ran it, so a release cannot tell a waiter whose client is gone
//! (`counted` = `0`): it reserves the lock for that waiter for the hand-off
//! window, and the next waiter takes it once that runs out.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use fencelock::{Client, ErrorKind, LockOptions};
use fencelock_harness::RedisCluster;

/// The per-node timeout of these clients; the hand-off window is twice it.
const NODE_TIMEOUT: Duration = Duration::from_millis(500);

async fn cluster_client(cluster: &RedisCluster) -> Client {
    Client::builder()
        .node(cluster.url())
        .node_timeout(NODE_TIMEOUT)
        .connect_timeout(ms(2_000))
        .build()
        .await
        .expect("client builds")
}

fn options(wait: u64) -> LockOptions {
    LockOptions::new(ms(10_000)).wait(ms(wait))
}

/// The master that owns `key`'s slot: the only one that answers for it
/// (the others redirect with MOVED).
fn owner<'a>(cluster: &'a RedisCluster, key: &str) -> &'a RedisNode {
    cluster
        .nodes()
        .iter()
        .find(|node| {
            redis::cmd("EXISTS")
                .arg(key)
                .query::<i64>(&mut node.connection())
                .is_ok()
        })
        .expect("one master owns every slot")
}

fn queue_key(resource: &str) -> String {
    queue_keys(resource).0
}

fn queue_len(cluster: &RedisCluster, resource: &str) -> usize {
    let queue = queue_key(resource);
    match owner(cluster, &queue).command(&["ZCARD", &queue]) {
        redis::Value::Int(n) => n as usize,
        other => panic!("unexpected ZCARD reply {other:?}"),
    }
}

/// Wake-ups sent: `PUBLISH` calls on every master (scripts' included; a
/// message relayed over the cluster bus is not a call on the receiving node).
fn wakes(cluster: &RedisCluster) -> u64 {
    cluster
        .nodes()
        .iter()
        .map(|node| node.command_calls("publish"))
        .sum()
}

/// `waiters` clients queue up behind a holder on the cluster: [`served_in_order`].
async fn queue_up(cluster: &RedisCluster, resource: &str, waiters: usize, fair: bool) -> Vec<usize> {
    let mut clients = Vec::new();
    for _ in 0..=waiters {
        clients.push(cluster_client(cluster).await);
    }
    let holder = clients.remove(0);
    served_in_order(holder, clients, resource, fair, || queue_len(cluster, resource)).await
}

/// Puts a waiter of a client that is gone (nobody listens on its channel)
/// first in `resource`'s line, with a lease that never runs out.
fn ghost_first_in_line(cluster: &RedisCluster, resource: &str) {
    let node = owner(cluster, &queue_key(resource));
    queue_waiter(node, resource, "ffffffffffffffffffffffffffffffff:1", 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_release_wakes_one_waiter_in_arrival_order() {
    let cluster = RedisCluster::start(3);
    let wakes_before = wakes(&cluster);
    let order = queue_up(&cluster, "cl-herd", 6, false).await;
    assert_eq!(order, (0..6).collect::<Vec<_>>(), "grants out of arrival order");
    tokio::time::sleep(ms(100)).await;
    assert_eq!(
        wakes(&cluster) - wakes_before,
        6,
        "each release with someone waiting wakes exactly one waiter"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_fair_waiters_are_served_in_arrival_order_and_nobody_barges() {
    let cluster = RedisCluster::start(3);
    let order = queue_up(&cluster, "cl-fair", 6, true).await;
    assert_eq!(order, (0..6).collect::<Vec<_>>(), "grants out of arrival order");
    // A free lock with a live waiter first in line: a fair newcomer is
    // refused, and its refusal wakes that waiter.
    ghost_first_in_line(&cluster, "cl-nobarge");
    let client = cluster_client(&cluster).await;
    let wakes_before = wakes(&cluster);
    let err = client
        .acquire("cl-nobarge", options(0).fair(true))
        .await
        .expect_err("a fair newcomer took the lock ahead of the queue");
    assert_eq!(err.kind(), ErrorKind::NotAcquired);
    let key = lock_key("cl-nobarge");
    assert_eq!(get(owner(&cluster, &key), &key), None, "no key written");
    assert_eq!(
        wakes(&cluster) - wakes_before,
        1,
        "the first waiter was not woken"
    );
    // Without fair, a lock that is free when asked may be taken.
    let lock = client.acquire("cl-nobarge", options(0)).await.unwrap();
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_lost_wake_up_costs_one_pause_not_the_wait() {
    let cluster = RedisCluster::start(3);
    let holder = cluster_client(&cluster)
        .await
        .acquire("cl-lost", options(0))
        .await
        .unwrap();
    let waiter_client = cluster_client(&cluster).await;
    let waiter = tokio::spawn(async move { waiter_client.acquire("cl-lost", options(8_000)).await });
    assert!(wait_until(ms(5_000), || queue_len(&cluster, "cl-lost") == 1).await);
    // Every subscription dies just before the release: the wake-up reaches
    // nobody, and the lock stays reserved for the waiter (the shard cannot
    // count the cluster's listeners), who takes it at its next attempt.
    for node in cluster.nodes() {
        node.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    }
    let released = Instant::now();
    holder.release().await.unwrap();
    let lock = waiter
        .await
        .unwrap()
        .expect("the waiter got the lock without its wake-up");
    // Within one refresh pause (a third of the 1 s waiter lease) and a
    // loaded machine's slack, far within its 8 s wait.
    assert!(released.elapsed() < ms(1_500), "took {:?}", released.elapsed());
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_dead_waiter_first_in_line_costs_at_most_the_hand_off_window() {
    let cluster = RedisCluster::start(3);
    let holder = cluster_client(&cluster)
        .await
        .acquire("cl-ghost", options(0))
        .await
        .unwrap();
    ghost_first_in_line(&cluster, "cl-ghost");
    let waiter_client = cluster_client(&cluster).await;
    let waiter = tokio::spawn(async move { waiter_client.acquire("cl-ghost", options(10_000)).await });
    assert!(wait_until(ms(5_000), || queue_len(&cluster, "cl-ghost") == 2).await);
    let released = Instant::now();
    holder.release().await.unwrap();
    // The release reserved the lock for the ghost, who never takes it.
    let key = lock_key("cl-ghost");
    let reserved = get(owner(&cluster, &key), &key);
    assert_eq!(reserved.as_deref(), Some("w:ffffffffffffffffffffffffffffffff:1"));
    let lock = waiter.await.unwrap().expect("the live waiter got the lock");
    // Once the window (twice the node timeout) runs out, at the live
    // waiter's next attempt: a refresh pause at most, with slack.
    let window = NODE_TIMEOUT * 2;
    let took = released.elapsed();
    assert!(took < window + ms(1_000), "took {took:?}");
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_looping_holder_takes_the_lock_back_until_its_retakes_run_out() {
    let cluster = RedisCluster::start(3);
    let clients = [
        cluster_client(&cluster).await,
        cluster_client(&cluster).await,
        cluster_client(&cluster).await,
        cluster_client(&cluster).await,
    ];
    let one_in_line = || queue_len(&cluster, "cl-retake") == 1;
    retakes_run_out_then_the_waiter_is_served(clients, "cl-retake", one_in_line, || wakes(&cluster)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_semaphore_never_lets_more_than_its_permits_hold() {
    let cluster = RedisCluster::start(3);
    const PERMITS: u32 = 2;
    let holding = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let most = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let client = cluster_client(&cluster).await;
        for _ in 0..2 {
            let semaphore = client.semaphore("cl-sem", PERMITS).unwrap();
            let (holding, most) = (holding.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                let mut tokens = Vec::new();
                for _ in 0..8 {
                    let permit = semaphore.acquire(options(20_000)).await.unwrap();
                    let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokens.push(permit.fencing_token());
                    tokio::time::sleep(ms(2)).await;
                    holding.fetch_sub(1, Ordering::SeqCst);
                    permit.release().await.unwrap();
                }
                tokens
            }));
        }
    }
    let mut tokens = Vec::new();
    for task in tasks {
        tokens.extend(task.await.unwrap());
    }
    assert!(
        most.load(Ordering::SeqCst) <= PERMITS,
        "more holders than permits"
    );
    assert_eq!(
        most.load(Ordering::SeqCst),
        PERMITS,
        "the permits were never both in use"
    );
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 48, "every grant has its own fencing token");
}

/// The next leader an observation yields: by push, within a second (its
/// own reads come every 2 s).
async fn next_leader(observation: &mut fencelock::Observation) -> fencelock::Leader {
    let next = tokio::time::timeout(ms(1_000), observation.next()).await;
    next.ok().flatten().expect("no push within 1 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_observers_learn_each_new_leader_by_push() {
    let cluster = RedisCluster::start(3);
    let name = "cl-elect";
    let mut observation = cluster_client(&cluster).await.observe(name).unwrap();
    // The observer subscribes on the node it was given; the announcement,
    // published on the shard that owns the election, reaches it over the bus.
    let subscribed = wait_until(ms(5_000), || leader_observers(&cluster.nodes()[0], name) == 1).await;
    assert!(subscribed, "the observer never subscribed");
    let (first, second) = (cluster_client(&cluster).await, cluster_client(&cluster).await);
    let campaign = |value: &str| fencelock::CampaignOptions::new(ms(5_000)).value(value);
    let leader = first.campaign(name, campaign("host-a:1")).await.unwrap();
    let seen = next_leader(&mut observation).await;
    assert_eq!(
        (seen.value.as_slice(), seen.epoch),
        (&b"host-a:1"[..], leader.epoch())
    );
    // A second candidate waits in line; the leader resigns; it wins at once.
    let candidate = tokio::spawn(async move { second.campaign(name, campaign("host-b:2")).await });
    assert!(wait_until(ms(5_000), || queue_len(&cluster, name) == 1).await);
    let resigned = Instant::now();
    leader.resign().await.unwrap();
    let successor = candidate.await.unwrap().unwrap();
    assert!(resigned.elapsed() < ms(1_000), "took {:?}", resigned.elapsed());
    assert!(successor.epoch() > leader.epoch());
    let seen = next_leader(&mut observation).await;
    assert_eq!(
        (seen.value.as_slice(), seen.epoch),
        (&b"host-b:2"[..], successor.epoch())
    );
    successor.resign().await.unwrap();
}

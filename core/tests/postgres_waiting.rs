//! Waiting over PostgreSQL (docs/protocol.md §4.9, docs/postgres-store.md):
//! the waiters' queue, its wake-ups by NOTIFY, fair mode and re-takes behave
//! as on a Redis node.

mod common;

use std::time::Instant;

use common::{lock_key, ms, retakes_run_out_then_the_waiter_is_served, served_in_order, wait_until};
use fencelock::{Client, ErrorKind, LockOptions};
use fencelock_harness::PostgresNode;

async fn client(node: &PostgresNode) -> Client {
    Client::builder()
        .node(node.url())
        .node_timeout(ms(2_000))
        .build()
        .await
        .expect("a client of a PostgreSQL node builds")
}

fn options(wait: u64) -> LockOptions {
    LockOptions::new(ms(10_000)).wait(ms(wait))
}

fn queue_len(node: &PostgresNode, resource: &str) -> usize {
    let queue = format!("{}:queue", lock_key(resource));
    node.sql(&format!(
        "SELECT count(*) FROM fencelock.zset_members WHERE key = '{queue}'"
    ))
    .parse()
    .unwrap()
}

fn held_by(node: &PostgresNode, resource: &str) -> Option<String> {
    let value = node.sql(&format!(
        "SELECT coalesce(max(value), '') FROM fencelock.keys \
         WHERE key = '{}' AND (expires_at IS NULL OR expires_at > clock_timestamp())",
        lock_key(resource)
    ));
    (!value.is_empty()).then_some(value)
}

/// `waiters` clients queue up behind a holder: [`served_in_order`].
async fn queue_up(node: &PostgresNode, resource: &str, waiters: usize, fair: bool) -> Vec<usize> {
    let mut clients = Vec::new();
    for _ in 0..=waiters {
        clients.push(client(node).await);
    }
    let holder = clients.remove(0);
    served_in_order(holder, clients, resource, fair, || queue_len(node, resource)).await
}

/// Puts a waiter of a client that is gone (nobody listens for it) first in
/// `resource`'s line, its place leased for a minute.
fn ghost_first_in_line(node: &PostgresNode, resource: &str) {
    let (queue, leases) = (
        format!("{}:queue", lock_key(resource)),
        format!("{}:leases", lock_key(resource)),
    );
    let ghost = "ffffffffffffffffffffffffffffffff:1";
    node.sql(&format!(
        "INSERT INTO fencelock.keys (key, kind, expires_at) VALUES \
         ('{queue}', 'zset', clock_timestamp() + interval '60 s'), \
         ('{leases}', 'zset', clock_timestamp() + interval '60 s'); \
         INSERT INTO fencelock.zset_members (key, member, score) VALUES \
         ('{queue}', '{ghost}', 1), \
         ('{leases}', '{ghost}', fencelock.clock_us() / 1000 + 60000)"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_postgres_waiters_are_served_in_arrival_order() {
    let node = PostgresNode::start();
    let order = queue_up(&node, "pg-order", 5, false).await;
    assert_eq!(order, (0..5).collect::<Vec<_>>(), "grants out of arrival order");
    assert_eq!(queue_len(&node, "pg-order"), 0, "the queue ends empty");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_postgres_fair_waiters_are_served_in_arrival_order_and_nobody_barges() {
    let node = PostgresNode::start();
    let order = queue_up(&node, "pg-fair", 5, true).await;
    assert_eq!(order, (0..5).collect::<Vec<_>>(), "grants out of arrival order");
    // A free lock with a live waiter first in line: a fair newcomer is refused.
    ghost_first_in_line(&node, "pg-nobarge");
    let client = client(&node).await;
    let err = client
        .acquire("pg-nobarge", options(0).fair(true))
        .await
        .expect_err("a fair newcomer took the lock ahead of the queue");
    assert_eq!(err.kind(), ErrorKind::NotAcquired);
    assert_eq!(held_by(&node, "pg-nobarge"), None, "no key written");
    // Without fair, a lock that is free when asked may be taken.
    let lock = client.acquire("pg-nobarge", options(0)).await.unwrap();
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_postgres_a_release_skips_a_waiter_whose_client_is_gone() {
    let node = PostgresNode::start();
    let holder = client(&node).await.acquire("pg-ghost", options(0)).await.unwrap();
    ghost_first_in_line(&node, "pg-ghost");
    let waiter_client = client(&node).await;
    let waiter = tokio::spawn(async move { waiter_client.acquire("pg-ghost", options(10_000)).await });
    assert!(wait_until(ms(10_000), || queue_len(&node, "pg-ghost") == 2).await);
    // Until the waiter's client listens, its wake-up could not be counted.
    tokio::time::sleep(ms(500)).await;
    let released = Instant::now();
    holder.release().await.unwrap();
    let lock = waiter.await.unwrap().expect("the live waiter got the lock");
    // Woken by the release, not by its own next attempt a refresh later:
    // nobody listens for the ghost (no session holds its advisory lock),
    // so the release skipped it.
    assert!(released.elapsed() < ms(300), "took {:?}", released.elapsed());
    assert_eq!(queue_len(&node, "pg-ghost"), 0, "the ghost is out of the queue");
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_postgres_a_looping_holder_takes_the_lock_back_until_its_retakes_run_out() {
    let node = PostgresNode::start();
    let clients = [
        client(&node).await,
        client(&node).await,
        client(&node).await,
        client(&node).await,
    ];
    let one_in_line = || queue_len(&node, "pg-retake") == 1;
    // NOTIFYs are not counted here; the waiter's flag shows none served it.
    retakes_run_out_then_the_waiter_is_served(clients, "pg-retake", one_in_line, || 0).await;
}

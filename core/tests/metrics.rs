//! A client's metrics (design.md §8) move exactly as a scripted scenario
//! says: acquire, contend, wait, release, renew, lose, cancel.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use fencelock::{ErrorKind, LockOptions, LossReason};

fn options(ttl: u64, wait: u64) -> LockOptions {
    LockOptions::new(ms(ttl)).wait(ms(wait))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_follow_a_scripted_scenario() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let (a, b) = (client(&nodes).await, client(&nodes).await);

    // A takes the lock: one acquisition, one lock held, one latency sample.
    let held = a.acquire("m", options(10_000, 0)).await.unwrap();
    let m = a.metrics();
    assert_eq!((m.acquired, m.held, m.acquire_latency.count), (1, 1, 1));
    assert!(m.acquire_latency.sum > Duration::ZERO && m.acquire_latency.quantile(1.0).is_some());

    // B contends: a refused try is a failure of kind not_acquired.
    assert!(b.try_acquire("m", options(10_000, 0)).await.unwrap().is_none());
    let m = b.metrics();
    assert_eq!((m.acquired, m.failed(ErrorKind::NotAcquired), m.held), (0, 1, 0));

    // B waits: counted as waiting until A's release hands it the lock.
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move { b.acquire("m", options(1_000, 5_000)).await })
    };
    assert!(
        wait_until(ms(5_000), || b.metrics().waiting == 1).await,
        "B never counted as waiting"
    );
    held.release().await.unwrap();
    let lock = waiting.await.unwrap().unwrap();
    let (ma, mb) = (a.metrics(), b.metrics());
    assert_eq!((ma.released, ma.held), (1, 0));
    assert_eq!((mb.acquired, mb.waiting, mb.held), (1, 0, 1));

    // B's 1 s lease renews (a late renewal would see it expired, not
    // deleted); then its key goes: one loss, deleted.
    assert!(
        wait_until(ms(3_000), || b.metrics().renewals >= 1).await,
        "no renewal counted"
    );
    nodes[0].command(&["DEL", &lock_key("m")]);
    assert_eq!(
        tokio::time::timeout(ms(3_000), lock.lost()).await.unwrap(),
        LossReason::Deleted
    );
    let m = b.metrics();
    assert_eq!(
        (m.lost(LossReason::Deleted), m.held, m.lost(LossReason::Expired)),
        (1, 0, 0)
    );
    assert_eq!(m.renewal_failures, 0);
    assert_eq!(lock.release().await.unwrap_err().kind(), ErrorKind::NotHeld);
    assert_eq!(b.metrics().released, 0, "a failed release is no release");

    // A waiting call dropped by its caller counts as cancelled, and stops waiting.
    let c = client(&nodes).await;
    let _blocker = a.acquire("m", options(10_000, 0)).await.unwrap();
    let given_up = tokio::time::timeout(ms(300), c.acquire("m", options(10_000, 10_000))).await;
    assert!(given_up.is_err(), "the wait should still have been going");
    let m = c.metrics();
    assert_eq!((m.failed(ErrorKind::Cancelled), m.waiting, m.acquired), (1, 0, 0));

    // Bad input is a failure too; semaphores and read-write locks count as acquisitions.
    assert!(c.acquire("", options(10_000, 0)).await.is_err());
    assert_eq!(c.metrics().failed(ErrorKind::InvalidArgument), 1);
    let permit = c
        .semaphore("m-sem", 2)
        .unwrap()
        .acquire(options(10_000, 0))
        .await
        .unwrap();
    let reader = c.rw_lock("m-rw").unwrap().read(options(10_000, 0)).await.unwrap();
    assert_eq!((c.metrics().acquired, c.metrics().held), (2, 2));
    drop(permit);
    drop(reader);
    assert_eq!(c.metrics().held, 0, "dropped handles are no longer held");
}

/// The `waiting` gauge counts calls waiting in a queue: an acquire that may
/// wait but is granted at once (a looping holder's re-take among them)
/// never shows there, however closely it is watched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_granted_at_once_never_counts_as_waiting() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (client, stop) = (client.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut samples, mut seen_waiting) = (0u64, 0u64);
            while !stop.load(Ordering::SeqCst) {
                samples += 1;
                seen_waiting += u64::from(client.metrics().waiting > 0);
                tokio::task::yield_now().await;
            }
            (samples, seen_waiting)
        })
    };
    for _ in 0..200 {
        let lock = client.acquire("at-once", options(10_000, 5_000)).await.unwrap();
        lock.release().await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    let (samples, seen_waiting) = watcher.await.unwrap();
    assert!(samples > 200, "the watcher hardly ran ({samples} samples)");
    assert_eq!(
        seen_waiting, 0,
        "{seen_waiting} of {samples} samples saw a call waiting"
    );
}

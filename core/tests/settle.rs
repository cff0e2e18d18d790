//! `Client::settle`: waiting for the undo of abandoned acquire attempts, so
//! a process about to exit leaves no attempt's key behind.

mod common;

use std::future::Future;
use std::task::{Context, Waker};
use std::time::Instant;

use common::*;
use fencelock::{Canceller, Client, LockOptions};
use fencelock_harness::{FaultProxy, Mode};

/// The attempt's key is on the node and its granting reply is 200 ms away
/// when the acquire is dropped: once `settle` returns, the undo has run.
#[tokio::test]
async fn settle_returns_once_a_cancelled_attempt_is_undone() {
    let node = RedisNode::start(&NodeOptions::default());
    let proxy = FaultProxy::start(node.port());
    let client = fencelock::Client::builder()
        .node(proxy.url())
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .expect("client builds");
    proxy.set(Mode::Delay {
        each_way: ms(200),
        jitter: ms(0),
    });
    let acquire = client.acquire("settle", LockOptions::new(ms(30_000)).wait(ms(0)));
    let key_on_node = async {
        while get(&node, &lock_key("settle")).is_none() {
            tokio::time::sleep(ms(2)).await;
        }
    };
    tokio::select! {
        acquired = acquire => panic!("the grant beat the test: {acquired:?}"),
        () = key_on_node => {}
    }
    // The acquire future is dropped here, mid-attempt.
    tokio::time::timeout(ms(10_000), client.settle())
        .await
        .expect("settle is bounded by the node timeout");
    assert_eq!(
        get(&node, &lock_key("settle")),
        None,
        "settle returned before the undo ran"
    );
    // Nothing running: at once.
    tokio::time::timeout(ms(1000), client.settle())
        .await
        .expect("settle with nothing to wait for");
}

/// A caller off any tokio runtime stops waiting for an acquire (drops it),
/// then asks the client to settle: the attempt is torn down on the core's
/// runtime a moment later, and `settle` must wait for that and for the
/// clean-up it starts (leaving the queue), not return before either began
/// (the JVM front's cancelled-wait test found this).
#[test]
fn settle_waits_for_a_dropped_acquire_to_leave_the_queue() {
    let still_queued = still_queued_after_settle(
        "dropped",
        |client, resource, options| {
            let (client, resource) = (client.clone(), resource.to_owned());
            let mut waiting = Box::pin(async move { client.acquire(&resource, options).await });
            let mut context = Context::from_waker(Waker::noop());
            assert!(waiting.as_mut().poll(&mut context).is_pending());
            waiting
        },
        drop,
    );
    assert!(
        !still_queued,
        "settle returned while the dropped waiter was still queued"
    );
}

/// The same through a `Canceller`, as the Python, Node, .NET and C fronts
/// cancel: the front's caller has its answer (cancelled) at once, the
/// operation is dropped on the core's runtime a moment later.
#[test]
fn settle_waits_for_a_cancelled_acquire_to_leave_the_queue() {
    let still_queued =
        still_queued_after_settle("cancelled", start_cancellable, |canceller| canceller.cancel());
    assert!(
        !still_queued,
        "settle returned while the cancelled waiter was still queued"
    );
}

/// The process-wide `fencelock::settle` (Python's exit hook; the C ABI's
/// `fencelock_settle`) after a front cancelled an attempt whose key is on
/// the node and whose reply is 200 ms away, the core's runtime busy: it
/// returns once the attempt is torn down and undone, as `Client::settle`
/// does: a task awaiting its teardown counts for the process too.
#[test]
fn the_process_wide_settle_waits_for_a_cancelled_attempt_to_be_undone() {
    let node = RedisNode::start(&NodeOptions::default());
    let proxy = FaultProxy::start(node.port());
    let client = block_off_runtime(
        Client::builder()
            .node(proxy.url())
            .node_timeout(GENEROUS_NODE_TIMEOUT)
            .build(),
    )
    .unwrap();
    proxy.set(Mode::Delay {
        each_way: ms(200),
        jitter: ms(0),
    });
    let key = lock_key("process-settle");
    let canceller = start_cancellable(
        &client,
        "process-settle",
        LockOptions::new(ms(30_000)).wait(ms(0)),
    );
    let deadline = Instant::now() + ms(3000);
    while get(&node, &key).is_none() {
        assert!(Instant::now() < deadline, "the attempt never reached the node");
        std::thread::sleep(ms(2));
    }
    keep_the_runtime_busy_for(ms(100));
    canceller.cancel();
    block_off_runtime(fencelock::settle());
    assert_eq!(
        get(&node, &key),
        None,
        "fencelock::settle returned before the undo ran"
    );
}

/// A wait started on the core's runtime under a `Canceller`, as the fronts start one.
fn start_cancellable(client: &Client, resource: &str, options: LockOptions) -> Canceller {
    let canceller = Canceller::new();
    let (client, resource, cancelled) = (client.clone(), resource.to_owned(), canceller.clone());
    fencelock::runtime_handle()
        .unwrap()
        .spawn(async move { cancelled.run(client.acquire(&resource, options)).await });
    canceller
}

/// Whether a waiter is still queued right after `settle`: `start` begins a
/// wait behind a holder, off any tokio runtime; once it is queued, the
/// core's runtime is made busy for a while (so whatever the attempt does
/// next waits for it), `abandon` gives up on the wait, and the client
/// settles.
fn still_queued_after_settle<T>(
    resource: &str,
    start: impl FnOnce(&Client, &str, LockOptions) -> T,
    abandon: impl FnOnce(T),
) -> bool {
    let node = RedisNode::start(&NodeOptions::default());
    let client = block_off_runtime(builder(std::slice::from_ref(&node)).build()).unwrap();
    let holder = block_off_runtime(client.acquire(resource, LockOptions::new(ms(30_000)))).unwrap();
    let waiting = start(&client, resource, LockOptions::new(ms(30_000)).wait(ms(30_000)));
    let (queue, _) = queue_keys(resource);
    let queued = || node.command(&["ZCARD", &queue]) == redis::Value::Int(1);
    let deadline = Instant::now() + ms(3000);
    while !queued() {
        assert!(Instant::now() < deadline, "the waiter never queued");
        std::thread::sleep(ms(5));
    }
    keep_the_runtime_busy_for(ms(100));
    abandon(waiting);
    block_off_runtime(client.settle());
    let still_queued = queued();
    block_off_runtime(holder.release()).unwrap();
    still_queued
}

/// Blocks the core's runtime for `how_long`, from the moment this returns:
/// whatever it has to do meanwhile (a cancelled task's teardown) waits.
fn keep_the_runtime_busy_for(how_long: std::time::Duration) {
    let (busy_tx, busy) = std::sync::mpsc::channel();
    fencelock::runtime_handle().unwrap().spawn(async move {
        busy_tx.send(()).unwrap();
        std::thread::sleep(how_long);
    });
    busy.recv().unwrap();
}

/// A release dropped after its first poll (a timeout around it, or a
/// front's cancel) still releases the lock, and `settle` waits for it.
/// Before the fix it stopped where it was: the lock, already marked
/// released, stayed held on the node until its ttl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_waits_for_a_release_whose_caller_stopped_waiting() {
    let node = RedisNode::start(&NodeOptions::default());
    let client = client(std::slice::from_ref(&node)).await;
    let lock = client
        .acquire("dropped-release", LockOptions::new(ms(30_000)))
        .await
        .unwrap();
    let mut release = Box::pin(lock.release());
    let polled = release.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    assert!(polled.is_pending(), "the release ended in its first poll");
    drop(release);
    tokio::time::timeout(ms(10_000), client.settle())
        .await
        .expect("settle is bounded by the node timeout");
    assert_eq!(
        get(&node, &lock_key("dropped-release")),
        None,
        "the lock is still held on the node"
    );
    assert!(!lock.is_held());
}

/// A release a front asked for and cancelled before its task was first
/// polled (`fencelock_operation_cancel` right after
/// `fencelock_lock_release_async`) still releases the lock. Before the fix
/// a release never polled was dropped with nothing sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_cancelled_before_its_first_poll_still_releases() {
    let node = RedisNode::start(&NodeOptions::default());
    let client = client(std::slice::from_ref(&node)).await;
    let lock = client
        .acquire("unpolled-release", LockOptions::new(ms(30_000)))
        .await
        .unwrap();
    drop(lock.release_task());
    tokio::time::timeout(ms(10_000), client.settle())
        .await
        .expect("settle is bounded by the node timeout");
    assert_eq!(
        get(&node, &lock_key("unpolled-release")),
        None,
        "the lock is still held on the node"
    );
}

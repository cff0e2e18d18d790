//! Single-node locks against a real redis-server.

mod common;

use common::*;
use fencelock::{ErrorKind, LockOptions, LockStatus};

#[tokio::test]
async fn acquire_release_roundtrip() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let lock = client
        .acquire("orders:1", LockOptions::new(ms(2000)))
        .await
        .unwrap();
    assert!(lock.is_held());
    assert_eq!(lock.resource(), "orders:1");
    assert!(lock.remaining() > ms(1900) && lock.remaining() <= ms(2000));
    assert!(get(&nodes[0], &lock_key("orders:1")).is_some());
    let other = client
        .try_acquire("orders:1", LockOptions::new(ms(2000)))
        .await
        .unwrap();
    assert!(other.is_none(), "second holder while held");
    lock.release().await.unwrap();
    assert_eq!(lock.status(), LockStatus::Released);
    assert!(!lock.is_held());
    assert_eq!(get(&nodes[0], &lock_key("orders:1")), None);
    assert_eq!(lock.release().await.unwrap_err().kind(), ErrorKind::NotHeld);
    let again = client
        .try_acquire("orders:1", LockOptions::new(ms(2000)))
        .await
        .unwrap();
    assert!(again.is_some());
}

#[tokio::test]
async fn waiting_acquire_gets_the_lock_after_release_and_times_out_otherwise() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let held = client
        .acquire("jobs:a", LockOptions::new(ms(5000)))
        .await
        .unwrap();
    let err = client
        .acquire("jobs:a", LockOptions::new(ms(5000)).wait(ms(150)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.to_string().contains("jobs:a"), "{err}");
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .acquire("jobs:a", LockOptions::new(ms(5000)).wait(ms(3000)))
                .await
        })
    };
    tokio::time::sleep(ms(100)).await;
    held.release().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    assert!(second.fencing_token() > held.fencing_token());
}

#[tokio::test]
async fn fixed_lease_expires_and_signals_loss() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let lock = client
        .acquire("lease", LockOptions::new(ms(300)).auto_renew(false))
        .await
        .unwrap();
    assert!(
        client
            .try_acquire("lease", LockOptions::new(ms(300)))
            .await
            .unwrap()
            .is_none()
    );
    let reason = tokio::time::timeout(ms(1000), lock.lost())
        .await
        .expect("loss signalled at expiry");
    assert_eq!(reason, fencelock::LossReason::Expired);
    assert!(!lock.is_held());
    // The key's ttl started when the node applied the SET, up to a round trip
    // (< the node timeout) after the validity's start: retry for 500 ms rather
    // than once after a fixed 50 ms. Nobody releases it: only expiry frees it.
    let next = client
        .acquire("lease", LockOptions::new(ms(300)).wait(ms(500)))
        .await;
    assert!(next.is_ok(), "TTL expiry frees the lock: {next:?}");
    assert_eq!(lock.release().await.unwrap_err().kind(), ErrorKind::NotHeld);
}

#[tokio::test]
async fn non_owner_cannot_release_or_extend() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let a = client
        .acquire("shared", LockOptions::new(ms(200)).auto_renew(false))
        .await
        .unwrap();
    tokio::time::sleep(ms(300)).await;
    let b = client
        .acquire("shared", LockOptions::new(ms(5000)))
        .await
        .unwrap();
    let b_token = get(&nodes[0], &lock_key("shared")).unwrap();
    // A's lease ended: its release and extend must leave B's key alone.
    assert_eq!(a.release().await.unwrap_err().kind(), ErrorKind::NotHeld);
    assert_eq!(a.extend(ms(5000)).await.unwrap_err().kind(), ErrorKind::Lost);
    assert_eq!(get(&nodes[0], &lock_key("shared")), Some(b_token.clone()));
    assert!(b.is_held());
    b.release().await.unwrap();
}

#[tokio::test]
async fn extend_never_recreates_a_missing_key() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let lock = client
        .acquire("ext", LockOptions::new(ms(2000)).auto_renew(false))
        .await
        .unwrap();
    lock.extend(ms(4000)).await.unwrap();
    assert!(pttl(&nodes[0], &lock_key("ext")) > 3000);
    nodes[0].command(&["DEL", &lock_key("ext")]);
    let err = lock.extend(ms(4000)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Lost, "{err}");
    assert_eq!(
        get(&nodes[0], &lock_key("ext")),
        None,
        "extend re-created the key"
    );
    assert!(matches!(lock.status(), LockStatus::Lost(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_counter_under_contention_single_node() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    exact_counter(&nodes).await;
}

#[tokio::test]
async fn dropping_an_acquire_future_leaves_no_key() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let holder = client
        .acquire("cancel", LockOptions::new(ms(3000)))
        .await
        .unwrap();
    let waiting = client.acquire("cancel", LockOptions::new(ms(3000)).wait(ms(10_000)));
    assert!(tokio::time::timeout(ms(100), waiting).await.is_err());
    holder.release().await.unwrap();
    // The cancelled waiter leaves its queue in the background: a release
    // reaching the node first hands it the key for a window, which its
    // leave then clears.
    assert!(
        wait_until(ms(2_000), || lock_keys_on(&nodes[0]).is_empty()).await,
        "a cancelled acquire left a key"
    );
}

#[tokio::test]
async fn cancellation_storm_leaves_no_key_and_no_renewal() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let mut tasks = Vec::new();
    for i in 0..200 {
        let client = client.clone();
        let resource = format!("storm:{}", i % 20);
        tasks.push(tokio::spawn(async move {
            let _ = client
                .acquire(&resource, LockOptions::new(ms(300)).wait(ms(1000)))
                .await;
        }));
    }
    tokio::time::sleep(ms(5)).await;
    for task in &tasks {
        task.abort();
    }
    // Whatever was granted is dropped (no renewal) or cleaned up: after 3×TTL nothing remains.
    tokio::time::sleep(ms(900)).await;
    // Renewals go as EVAL, the rest as EVALSHA.
    let script_calls = || nodes[0].command_calls("evalsha") + nodes[0].command_calls("eval");
    let before = script_calls();
    let left = lock_keys_on(&nodes[0]);
    assert!(left.is_empty(), "orphan keys after the storm: {left:?}");
    tokio::time::sleep(ms(300)).await;
    assert_eq!(script_calls(), before, "a watchdog outlived its acquire");
}

/// A caller off any tokio runtime (a front's thread, another executor)
/// stops waiting for an acquire after the grant came but before it read
/// it: the lock must be released at once, not left to block the resource
/// until its ttl (the JVM front's test found this).
#[test]
fn a_grant_nobody_read_is_released_not_left_until_its_ttl() {
    use std::future::Future;
    use std::task::Context;

    let node = RedisNode::start(&NodeOptions::default());
    let client = block_off_runtime(builder(std::slice::from_ref(&node)).build()).unwrap();
    for kind in ["lock", "semaphore", "rw"] {
        let resource = format!("unread-{kind}");
        let options = LockOptions::new(ms(30_000));
        let semaphore = client.semaphore(&resource, 1).unwrap();
        let rw = client.rw_lock(&resource).unwrap();
        let mut acquire: std::pin::Pin<Box<dyn Future<Output = fencelock::Result<fencelock::Lock>>>> =
            match kind {
                "lock" => Box::pin(client.acquire(&resource, options)),
                "semaphore" => Box::pin(semaphore.acquire(options)),
                _ => Box::pin(rw.write(options)),
            };
        let mut context = Context::from_waker(std::task::Waker::noop());
        assert!(
            acquire.as_mut().poll(&mut context).is_pending(),
            "off a runtime, the attempt runs on the core's"
        );
        // The grant comes while nobody polls; then the caller gives up.
        std::thread::sleep(ms(300));
        drop(acquire);
        let soon = LockOptions::new(ms(1000)).wait(ms(3000));
        let again = block_off_runtime(async {
            match kind {
                "lock" => client.acquire(&resource, soon).await,
                "semaphore" => semaphore.acquire(soon).await,
                _ => rw.write(soon).await,
            }
        });
        assert!(
            again.is_ok(),
            "{kind}: the unread grant still holds the resource (until its 30 s ttl): {again:?}"
        );
    }
}

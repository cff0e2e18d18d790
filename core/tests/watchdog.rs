//! Auto-renewal, loss detection, and the watchdog's life cycle.

mod common;

use std::future::Future;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use common::*;
use fencelock::{LockOptions, LockStatus, LossReason};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_the_lock_for_ten_ttls_then_stops_after_release() {
    for n in [1, 5] {
        let nodes = RedisNode::start_many(n, &NodeOptions::default());
        let client = client(&nodes).await;
        let ttl = ms(300);
        let lock = client.acquire("long-job", LockOptions::new(ttl)).await.unwrap();
        let key = lock_key("long-job");
        let until = Instant::now() + ttl * 10;
        // Redlock promises the key on a majority, not on every node: a node
        // whose renewal was slow may let its copy expire.
        let mut min_live = usize::MAX;
        while Instant::now() < until {
            let live =
                tokio::task::block_in_place(|| nodes.iter().filter(|node| pttl(node, &key) > 0).count());
            min_live = min_live.min(live);
            assert!(lock.is_held(), "n={n}: lock reported not held while renewed");
            tokio::time::sleep(ms(25)).await;
        }
        assert!(
            min_live > n / 2,
            "n={n}: the key was live on only {min_live} nodes at some point while held"
        );
        let renewals = lock.renewals();
        assert!(
            (25..=36).contains(&renewals),
            "n={n}: {renewals} renewals in 10 TTLs (expected about 30)"
        );
        lock.release().await.unwrap();
        let after_release = nodes[0].command_calls("evalsha") + nodes[0].command_calls("eval");
        tokio::time::sleep(ttl * 3).await;
        let later = nodes[0].command_calls("evalsha") + nodes[0].command_calls("eval");
        assert_eq!(after_release, later, "n={n}: renewals sent after release");
        assert_eq!(get(&nodes[0], &key), None);
    }
}

#[tokio::test]
async fn dropping_the_lock_stops_renewal_and_the_key_expires() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let lock = client
        .acquire("dropped", LockOptions::new(ms(300)))
        .await
        .unwrap();
    tokio::time::sleep(ms(150)).await;
    drop(lock);
    // Renewals go as EVAL.
    let calls = nodes[0].command_calls("eval");
    tokio::time::sleep(ms(500)).await;
    assert_eq!(nodes[0].command_calls("eval"), calls, "renewals after drop");
    assert_eq!(get(&nodes[0], &lock_key("dropped")), None, "key outlived its ttl");
}

async fn loss_after(tamper: impl FnOnce(&RedisNode), expected: LossReason) {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let ttl = ms(600);
    let lock = client.acquire("victim", LockOptions::new(ttl)).await.unwrap();
    tokio::time::sleep(ms(50)).await;
    tamper(&nodes[0]);
    let tampered = Instant::now();
    let reason = tokio::time::timeout(ttl, lock.lost())
        .await
        .expect("loss signalled");
    let delay = tampered.elapsed();
    assert_eq!(reason, expected);
    // Detected at the next renewal: within one renew interval plus the per-node timeout.
    assert!(
        delay <= ttl / 3 + NODE_TIMEOUT + ms(50),
        "loss detected after {delay:?}"
    );
    assert!(!lock.is_held());
    assert_eq!(lock.status(), LockStatus::Lost(expected));
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        fencelock::ErrorKind::NotHeld
    );
}

#[tokio::test]
async fn deleted_key_is_signalled_as_loss() {
    loss_after(
        |node| drop(node.command(&["DEL", &lock_key("victim")])),
        LossReason::Deleted,
    )
    .await;
}

#[tokio::test]
async fn taken_over_key_is_signalled_and_left_alone() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let lock = client.acquire("victim", LockOptions::new(ms(600))).await.unwrap();
    nodes[0].command(&["SET", &lock_key("victim"), "intruder", "PX", "10000"]);
    let reason = tokio::time::timeout(ms(600), lock.lost())
        .await
        .expect("loss signalled");
    assert_eq!(reason, LossReason::TakenOver);
    assert_eq!(
        lock.release().await.unwrap_err().kind(),
        fencelock::ErrorKind::NotHeld
    );
    assert_eq!(
        get(&nodes[0], &lock_key("victim")).as_deref(),
        Some("intruder"),
        "foreign key touched"
    );
}

#[tokio::test]
async fn flushall_is_signalled_as_loss() {
    loss_after(|node| drop(node.command(&["FLUSHALL"])), LossReason::Deleted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minority_loss_keeps_the_lock_majority_loss_loses_it() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let client = client(&nodes).await;
    // 1.5 s: a renewal every 500 ms leaves room for retries on a loaded 2-core machine.
    let ttl = ms(1500);
    // Killing 2 of the 3 nodes a quorum-only grant sits on would rightly
    // lose the lock: start from one held on all 5.
    let lock = acquire_everywhere(&client, &nodes, "quorum-held", LockOptions::new(ttl)).await;
    nodes[0].kill();
    nodes[1].kill();
    tokio::time::sleep(ttl * 2).await;
    assert!(lock.is_held(), "lost with 3 of 5 nodes up");
    assert_eq!(lock.status(), LockStatus::Held);
    let renewals = lock.renewals();
    assert!(renewals >= 4, "only {renewals} renewals with a majority up");
    nodes[2].kill();
    let killed = Instant::now();
    let reason = tokio::time::timeout(ttl * 2, lock.lost())
        .await
        .expect("loss signalled");
    assert_eq!(reason, LossReason::Unreachable);
    // Transient failures are retried until the validity runs out, not longer.
    assert!(
        killed.elapsed() <= ttl + ms(100),
        "loss signalled after {:?}",
        killed.elapsed()
    );
    let err = lock.release().await.unwrap_err();
    assert_eq!(err.kind(), fencelock::ErrorKind::NotHeld);
}

#[tokio::test]
async fn renewal_limits_stop_the_watchdog() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let ttl = ms(300);
    let lock = client
        .acquire("capped", LockOptions::new(ttl).max_renewals(2))
        .await
        .unwrap();
    let reason = tokio::time::timeout(ms(2000), lock.lost())
        .await
        .expect("expiry signalled");
    assert_eq!(reason, LossReason::Expired);
    assert_eq!(lock.renewals(), 2);
    let held = client
        .acquire("held-max", LockOptions::new(ttl).max_hold(ms(700)))
        .await
        .unwrap();
    let started = Instant::now();
    tokio::time::timeout(ms(2000), held.lost())
        .await
        .expect("expiry signalled");
    assert!(
        started.elapsed() <= ms(800),
        "held {:?} past max_hold",
        started.elapsed()
    );
}

#[tokio::test]
async fn extend_changes_the_ttl_of_later_renewals() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let lock = client
        .acquire("ext-renew", LockOptions::new(ms(3000)))
        .await
        .unwrap();
    lock.extend(ms(300)).await.unwrap();
    assert!(lock.remaining() <= ms(300));
    // Renewed every 100 ms now, so it stays alive well past 300 ms.
    tokio::time::sleep(ms(900)).await;
    assert!(lock.is_held());
    assert!(pttl(&nodes[0], &lock_key("ext-renew")) <= 300);
    assert!(lock.renewals() >= 5, "{} renewals", lock.renewals());
    lock.release().await.unwrap();
}

/// An extend whose caller stops waiting after its first poll (a timeout
/// around it, or a front's cancel) still goes through to its end, so the
/// watchdog renews at the new ttl's pace. Before the fix the dropped extend
/// stopped where it was: its shorter ttl reached the node, but the watchdog
/// kept the plan of the longer one, and the key expired before the first
/// renewal (the lock lost at 300 ms, its loss signalled only at that renewal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extend_whose_caller_stopped_waiting_still_sets_the_renewal_pace() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let lock = client
        .acquire("ext-dropped", LockOptions::new(ms(3000)))
        .await
        .unwrap();
    let mut extend = Box::pin(lock.extend(ms(300)));
    let polled = extend.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    assert!(polled.is_pending(), "the extend ended in its first poll");
    drop(extend);
    tokio::time::sleep(ms(900)).await;
    assert_eq!(lock.status(), LockStatus::Held);
    assert!(lock.is_held());
    assert!(pttl(&nodes[0], &lock_key("ext-dropped")) <= 300);
    assert!(lock.renewals() >= 5, "{} renewals", lock.renewals());
    lock.release().await.unwrap();
}

/// CPU time this process used so far.
fn cpu_used() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given, which lives here.
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) },
        0
    );
    // SAFETY: filled by the successful call above.
    let usage = unsafe { usage.assume_init() };
    let of = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    of(usage.ru_utime) + of(usage.ru_stime)
}

/// While an extend holds a lock past the end of its validity (its node does
/// not answer, and the per-node timeout is long), the watchdog's renewal
/// waits for it without spinning. Before the fix its retry was due at the
/// end of validity, already past, so the watchdog looked again at once, over
/// and over, until the extend gave up: a core's worth of CPU for 1.5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_waits_for_a_slow_extend_without_spinning() {
    let node = RedisNode::start(&NodeOptions::default());
    let proxy = FaultProxy::start(node.port());
    let client = fencelock::Client::builder()
        .node(proxy.url())
        .node_timeout(ms(2_000))
        .build()
        .await
        .unwrap();
    let lock = client.acquire("busy", LockOptions::new(ms(300))).await.unwrap();
    proxy.set(Mode::Blackhole);
    let extending = tokio::spawn(lock.extend_task(ms(300)));
    // The validity ends within 300 ms; the extend waits up to 2 s.
    tokio::time::sleep(ms(400)).await;
    let (cpu_before, since) = (cpu_used(), Instant::now());
    tokio::time::sleep(ms(1_000)).await;
    let (cpu, wall) = (cpu_used() - cpu_before, since.elapsed());
    assert!(
        cpu < wall / 4,
        "the process used {cpu:?} of CPU in {wall:?} while the extend was under way"
    );
    assert!(!lock.is_held());
    assert!(
        extending.await.unwrap().is_err(),
        "the blackholed extend succeeded"
    );
    tokio::time::timeout(ms(2_000), lock.lost())
        .await
        .expect("the loss is signalled once the extend gave up");
}

#[tokio::test]
async fn three_hundred_locks_stay_renewed() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let ttl = ms(600);
    let mut locks = Vec::new();
    for i in 0..300 {
        locks.push(
            client
                .acquire(&format!("many:{i}"), LockOptions::new(ttl))
                .await
                .unwrap(),
        );
    }
    tokio::time::sleep(ttl * 2).await;
    assert!(locks.iter().all(|l| l.is_held() && l.renewals() >= 3));
    for lock in &locks {
        lock.release().await.unwrap();
    }
}

#[tokio::test]
async fn renewals_survive_a_flushed_script_cache() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let lock = client
        .acquire("flushed", LockOptions::new(ms(300)))
        .await
        .unwrap();
    nodes[0].command(&["SCRIPT", "FLUSH"]);
    tokio::time::sleep(ms(500)).await;
    assert!(lock.is_held(), "renewals stopped after SCRIPT FLUSH");
    assert!(lock.renewals() >= 3, "{} renewals", lock.renewals());
    nodes[0].command(&["SCRIPT", "FLUSH"]);
    lock.release().await.unwrap();
}

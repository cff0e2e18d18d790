//! The holder's own process fails: crash, pause, plain expiry
//! (reliability.md T04, T05, T14 with T17).

mod faults_support;

use std::time::{Duration, Instant};

use faults_support::child::Holder;
use faults_support::*;
use fencelock::{ErrorKind, LockOptions, RetryPolicy};

#[test]
#[ignore = "the holder child process of other tests, not a test"]
fn child_entry() {
    faults_support::child::run_child();
}

/// T04: the holder (a child process with a watchdog) is killed with -9 at a
/// random point. A contender gets the lock no earlier than the dead holder's
/// validity ended, and no later than one ttl (plus retry slack) after the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t04_holder_killed_is_replaced_after_its_lease_not_before() {
    use rand::{Rng, SeedableRng};
    let test = "t04_holder_killed_is_replaced_after_its_lease_not_before";
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed(test));
    let runs = scale("t04", 4, 50);
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let urls: Vec<String> = nodes.iter().map(RedisNode::url).collect();
    let contender = builder_for(urls.clone())
        .retry(RetryPolicy::new(ms(10), ms(50)))
        .build()
        .await
        .unwrap();
    let ttl = ms(1000);
    for run in 0..runs {
        let resource = format!("t04:{run}");
        let mut holder = Holder::spawn(&urls, &resource, ttl, &[]);
        let holder_token = holder.acquire();
        tokio::time::sleep(ms(rng.random_range(0..=500))).await;
        // The child measured `remaining` after we asked and before we read
        // the answer: count it from the asking, or a slow pipe on a busy
        // machine would push the bound past the holder's real validity.
        let asked = Instant::now();
        let status = holder.status();
        let holder_valid_until = asked + status.remaining;
        holder.kill();
        let killed = Instant::now();
        let lock = contender
            .acquire(&resource, LockOptions::new(ttl).wait(ms(3000)))
            .await
            .unwrap_or_else(|e| panic!("run {run}: {e}"));
        let acquired = Instant::now();
        assert!(
            acquired + ms(2) >= holder_valid_until,
            "run {run}: acquired {:?} before the dead holder's validity ended",
            holder_valid_until - acquired
        );
        assert!(
            acquired <= killed + ttl + ms(150),
            "run {run}: acquired {:?} after the kill",
            acquired - killed
        );
        assert!(lock.fencing_token() > holder_token);
        lock.release().await.unwrap();
    }
}

/// T05: without a watchdog the lease ends at its validity: held (and
/// exclusive) before, free right after, on 1 and 5 nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t05_a_lease_without_renewal_ends_at_its_validity() {
    for n in [1, 5] {
        let nodes = RedisNode::start_many(n, &NodeOptions::default());
        let client = builder_for(nodes.iter().map(RedisNode::url))
            .build()
            .await
            .unwrap();
        let ttl = ms(500);
        for run in 0..3 {
            let history = History::new();
            let resource = format!("t05:{run}");
            let fixed = LockOptions::new(ttl).auto_renew(false).wait(Duration::ZERO);
            let (lock, _) = acquire_recorded(&client, &history, "A", &resource, fixed.clone(), ttl)
                .await
                .unwrap();
            let acquired = Instant::now();
            tokio::time::sleep_until((acquired + ms(400)).into()).await;
            assert!(lock.is_held(), "n={n}: not held at 400 ms of a 500 ms lease");
            let refused = client.try_acquire(&resource, fixed.clone()).await.unwrap();
            assert!(refused.is_none(), "n={n}: a contender got a held lock");
            // Poll until the contender wins; it must be after A's validity and by ttl + 50 ms.
            let contender = loop {
                if let Ok((lock, _)) =
                    acquire_recorded(&client, &history, "B", &resource, fixed.clone(), ttl).await
                {
                    break lock;
                }
                assert!(
                    acquired.elapsed() < ttl + ms(50),
                    "n={n}: lock not free {ttl:?} + 50 ms after grant"
                );
                tokio::time::sleep(ms(5)).await;
            };
            assert!(!lock.is_held(), "n={n}: A still valid while B holds");
            assert_no_violations(&history.check(&CheckOptions::default()));
            contender.release().await.unwrap();
        }
    }
}

/// T14 and T17, Kleppmann's scenario 2: the holder process is SIGSTOPped
/// past its ttl; B takes the lock with a larger token and writes. When A
/// wakes, its lock reads as not held, its fenced write is refused, and its
/// release leaves B's key alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t14_paused_holder_wakes_up_refused() {
    let runs = scale("t14", 3, 50);
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let urls: Vec<String> = nodes.iter().map(RedisNode::url).collect();
    let b = builder_for(urls.clone()).build().await.unwrap();
    let ttl = ms(1000);
    for run in 0..runs {
        let (resource, data) = (format!("t14:{run}"), format!("data:t14:{run}"));
        let mut holder = Holder::spawn(&urls, &resource, ttl, &[]);
        let token_a = holder.acquire();
        assert_eq!(holder.ask(&format!("write {data} A")), "write ok held=true");
        holder.signal(libc::SIGSTOP);
        let stopped = Instant::now();
        let lock_b = b
            .acquire(&resource, LockOptions::new(ttl).wait(ms(3000)))
            .await
            .unwrap_or_else(|e| panic!("run {run}: B never got the lock of a paused holder: {e}"));
        assert!(lock_b.fencing_token() > token_a);
        b.fenced_set(&data, "B", lock_b.fencing_token()).await.unwrap();
        tokio::time::sleep_until((stopped + ms(2000)).into()).await;
        holder.signal(libc::SIGCONT);
        let answer = tokio::task::block_in_place(|| holder.ask(&format!("write {data} A-late")));
        assert_eq!(
            answer,
            format!("write {} held=false", ErrorKind::StaleToken),
            "run {run}: the woken holder's write"
        );
        let released = tokio::task::block_in_place(|| holder.ask("release"));
        assert_eq!(released, format!("release {}", ErrorKind::NotHeld), "run {run}");
        assert_eq!(
            b.fenced_get(&data).await.unwrap(),
            Some(("B".into(), lock_b.fencing_token()))
        );
        assert!(lock_b.is_held(), "run {run}: A's wake-up disturbed B");
        lock_b.release().await.expect("B's key was intact on a majority");
    }
}

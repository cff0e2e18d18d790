//! The lock's own life cycle under repetition and abuse (reliability.md §3):
//! T03 repeated (release and extend are compare-and-act), T15 (extend makes
//! the key live longer on every quorum node) and T12's abort storm (cancelled
//! acquires leave no key and no renewal behind).

mod faults_support;

use std::time::{Duration, Instant};

use faults_support::*;
use fencelock::{ErrorKind, LockOptions, NodeOutcome};
use rand::{Rng, SeedableRng};

/// T03 ×N: A's lease (ttl 200 ms, no renewal) runs out; 300 ms later B
/// acquires. A's release is refused with the node saying "held by another",
/// A's extend reports `Lost`, B's key is untouched; B's second release is
/// `NotHeld`. A second expired lease nobody took is refused with the node
/// saying "missing": the two cases are told apart (redsync's −1 vs 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t03_expired_holder_never_touches_the_next_holders_key() {
    let runs = scale("t03", 20, 100);
    let node = RedisNode::start(&NodeOptions::default());
    let client = builder_for([node.url()]).build().await.unwrap();
    let fixed = LockOptions::new(ms(200)).auto_renew(false);
    for run in 0..runs {
        let (taken, abandoned) = (format!("t03:{run}:taken"), format!("t03:{run}:abandoned"));
        let a = client.acquire(&taken, fixed.clone()).await.unwrap();
        let a_alone = client.acquire(&abandoned, fixed.clone()).await.unwrap();
        tokio::time::sleep(ms(300)).await;
        let b = client.acquire(&taken, LockOptions::new(ms(5000))).await.unwrap();
        let b_value = get(&node, &lock_key(&taken)).expect("B's key");

        let refused = a.release().await.unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::NotHeld, "run {run}: {refused}");
        let extend = a.extend(ms(5000)).await.unwrap_err();
        assert_eq!(extend.kind(), ErrorKind::Lost, "run {run}: {extend}");
        assert_eq!(
            get(&node, &lock_key(&taken)),
            Some(b_value),
            "run {run}: B's key changed"
        );
        assert!(b.is_held(), "run {run}");

        let gone = a_alone.release().await.unwrap_err();
        assert_eq!(gone.kind(), ErrorKind::NotHeld, "run {run}: {gone}");
        b.release().await.unwrap();
        let twice = b.release().await.unwrap_err();
        assert_eq!(twice.kind(), ErrorKind::NotHeld, "run {run}: {twice}");
    }
}

/// T03, −1 vs 0: a lock that still believes it is held (its lease has not
/// run out) but whose key was deleted, or deleted and taken by B, is refused
/// on release with the node saying "missing" or "held by another". (Once the
/// lease has run out the lock knows it is lost and reports `NotHeld` without
/// the per-node detail, as the loop above checks.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t03_release_tells_a_missing_key_from_a_taken_one() {
    let node = RedisNode::start(&NodeOptions::default());
    let client = builder_for([node.url()]).build().await.unwrap();
    let held = LockOptions::new(ms(5000)).auto_renew(false);
    let missing = client.acquire("t03:missing", held.clone()).await.unwrap();
    let taken = client.acquire("t03:taken", held.clone()).await.unwrap();
    node.command(&["DEL", &lock_key("t03:missing"), &lock_key("t03:taken")]);
    let b = client.acquire("t03:taken", held).await.unwrap();

    let error = missing.release().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotHeld, "{error}");
    assert_node_said(&error, &NodeOutcome::Missing, 0);
    let error = taken.release().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotHeld, "{error}");
    assert_node_said(&error, &NodeOutcome::HeldByOther, 0);
    assert!(
        get(&node, &lock_key("t03:taken")).is_some(),
        "B's key was deleted"
    );
    b.release().await.unwrap();
}

/// The single node's answer in a refused release.
fn assert_node_said(error: &fencelock::Error, expected: &NodeOutcome, run: usize) {
    let outcomes: Vec<&NodeOutcome> = error.nodes().iter().map(|r| &r.outcome).collect();
    assert_eq!(outcomes, [expected], "run {run}: {error}");
}

/// T15: on 5 nodes, `extend` makes the PTTL strictly larger on every node of
/// the quorum, also with 2 nodes paused (their answers never come); the new
/// validity is the new ttl less the drift margin and the call's duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t15_extend_lengthens_the_key_on_every_quorum_node() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let client = builder_for(nodes.iter().map(RedisNode::url))
        .build()
        .await
        .unwrap();
    for paused in [0, 2] {
        let resource = format!("t15:{paused}");
        let key = lock_key(&resource);
        let lock = client
            .acquire(&resource, LockOptions::new(ms(2000)).auto_renew(false))
            .await
            .unwrap();
        tokio::time::sleep(ms(300)).await;
        // Acquire returns once a quorum granted; a slower node may never have
        // got the key. Pause non-holders first, then check every holder left.
        let (checked, stopped) = split_holders(&nodes, &key, paused);
        assert!(
            checked.len() >= 3,
            "{paused} paused: only {checked:?} hold the key"
        );
        let before: Vec<i64> = checked.iter().map(|&i| pttl(&nodes[i], &key)).collect();
        stopped.iter().for_each(|&i| nodes[i].pause());
        let new_ttl = ms(3000);
        let started = Instant::now();
        lock.extend(new_ttl).await.unwrap();
        // Validity first, then the time taken: the call can have cost it at
        // most what passed until this second reading.
        let validity = lock.remaining();
        let took = started.elapsed();
        // Extend returns at a quorum too: with no node paused, a 4th or 5th
        // holder's PEXPIRE may still be on its way, or never sent once the
        // quorum decided. So: the highest PTTL each holder shows within a
        // short wait, and the new ttl on at least a quorum of them (with 2
        // paused, that is every holder left). An un-extended key is below
        // 1.7 s, so only the extend can pass for the new ttl.
        let mut after = vec![i64::MIN; checked.len()];
        wait_until(ms(1000), || {
            for (seen, &i) in after.iter_mut().zip(&checked) {
                *seen = (*seen).max(pttl(&nodes[i], &key));
            }
            after.iter().all(|&a| a > 2900)
        })
        .await;
        stopped.iter().for_each(|&i| nodes[i].resume());
        let extended: Vec<usize> = checked
            .iter()
            .zip(&before)
            .zip(&after)
            .filter(|&((_, b), a)| a > b && *a > 2900)
            .map(|((&i, _), _)| i)
            .collect();
        assert!(
            extended.len() >= 3,
            "{paused} paused: the new ttl on only {extended:?} of {checked:?} (PTTL {before:?} → {after:?})"
        );
        let bound = validity_bound(new_ttl);
        assert!(validity <= bound, "validity {validity:?} above {bound:?}");
        assert!(
            validity + took + ms(10) >= bound,
            "validity {validity:?} lost more than the call's {took:?}"
        );
        lock.release().await.unwrap();
    }
}

/// Indices of the nodes holding `key` that stay running, and of the
/// `paused` nodes to stop: non-holders first, then holders from the end.
fn split_holders(nodes: &[RedisNode], key: &str, paused: usize) -> (Vec<usize>, Vec<usize>) {
    let (mut holders, others): (Vec<usize>, Vec<usize>) =
        (0..nodes.len()).partition(|&i| pttl(&nodes[i], key) > 0);
    let mut stopped: Vec<usize> = others.into_iter().take(paused).collect();
    while stopped.len() < paused {
        stopped.push(holders.pop().expect("enough nodes"));
    }
    (holders, stopped)
}

/// `ttl − (ttl·0.01 + 2 ms)`, the library's default drift margin.
fn validity_bound(ttl: Duration) -> Duration {
    fencelock_harness::validity_bound(ttl, &CheckOptions::default())
}

/// T12 abort storm: 4 workers start acquires (ttl 300 ms, watchdog on) and
/// abort them at random points, or drop what they got, for 2 s (5 s long).
/// After 3×ttl no lock key remains, and over a further ttl the node sees no
/// renewal (`PEXPIRE` and script calls in `INFO commandstats` stay flat).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t12_abort_storm_leaves_no_key_and_no_renewal() {
    let test = "t12_abort_storm_leaves_no_key_and_no_renewal";
    let storm = ms(scale("t12_storm (ms)", 2000, 5000) as u64);
    let base_seed = seed(test);
    let ttl = ms(300);
    let node = RedisNode::start(&NodeOptions::default());
    let client = builder_for([node.url()]).build().await.unwrap();
    assert_renewals_show_in_commandstats(&client, &node, ttl).await;

    let workers: Vec<_> = (0..4)
        .map(|w| {
            let client = client.clone();
            tokio::spawn(abort_worker(client, base_seed + w, storm, ttl))
        })
        .collect();
    let mut started = 0;
    for worker in workers {
        started += worker.await.unwrap();
    }
    eprintln!("t12: {started} acquires started and abandoned in {storm:?}");

    tokio::time::sleep(ttl * 3).await;
    assert_eq!(
        lock_keys_on(&node),
        Vec::<String>::new(),
        "orphan lock keys after the storm"
    );
    let script_calls = || node.command_calls("evalsha") + node.command_calls("eval");
    let (pexpire, scripts) = (node.command_calls("pexpire"), script_calls());
    tokio::time::sleep(ttl).await;
    assert_eq!(node.command_calls("pexpire"), pexpire, "a watchdog still renews");
    assert_eq!(script_calls(), scripts, "a script still runs");
}

/// The check above is only meaningful if renewals do show up as `PEXPIRE`
/// calls: a held lock with a watchdog must move the count.
async fn assert_renewals_show_in_commandstats(client: &fencelock::Client, node: &RedisNode, ttl: Duration) {
    let before = node.command_calls("pexpire");
    let lock = client.acquire("t12:probe", LockOptions::new(ttl)).await.unwrap();
    tokio::time::sleep(ttl).await;
    assert!(lock.renewals() > 0, "the watchdog did not renew");
    assert!(
        node.command_calls("pexpire") > before,
        "renewals are not counted as PEXPIRE"
    );
    lock.release().await.unwrap();
}

/// One storm worker: returns how many acquires it started.
async fn abort_worker(client: fencelock::Client, seed: u64, storm: Duration, ttl: Duration) -> usize {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let deadline = Instant::now() + storm;
    let mut started = 0;
    while Instant::now() < deadline {
        let resource = format!("t12:storm:{}", rng.random_range(0..8));
        let client = client.clone();
        let attempt = tokio::spawn(async move {
            // A grant held past the abort point is dropped with the task.
            let _lock = client
                .acquire(&resource, LockOptions::new(ttl).wait(ms(1000)))
                .await;
            tokio::time::sleep(ms(50)).await;
        });
        started += 1;
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..5000))).await;
        attempt.abort();
    }
    started
}

/// T30: a failed extend to a shorter ttl (the scenario, scaled
/// down): A holds a 20 s lease (no renewal) on 3 nodes; A's links to nodes 2
/// and 3 now take 200 ms each way (node timeout 100 ms). `extend(1 s)` is
/// confirmed by node 1 only and fails, yet nodes 2 and 3 apply it 200 ms
/// later. B (direct links) then takes nodes 2 and 3 about a second later.
/// A must not read itself as the holder past that point: the history
/// checker finds no overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t30_a_failed_extend_to_a_shorter_ttl_never_leaves_two_holders() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let proxies = proxies_for(&nodes);
    let a = proxied_client(&proxies).await;
    let b = builder_for(nodes.iter().map(RedisNode::url))
        .build()
        .await
        .unwrap();
    let history = History::new();
    let ttl = ms(20_000);
    let fixed = LockOptions::new(ttl).auto_renew(false);
    let lock = acquire_everywhere(&a, &nodes, "t30", fixed).await;
    let resource = lock.resource().to_owned();
    let requested = Instant::now();
    let a_grant = history.record(Grant::new(
        "A",
        &resource,
        requested,
        Instant::now(),
        lock.remaining(),
        ttl,
        lock.fencing_token(),
    ));
    for proxy in &proxies[1..] {
        proxy.set(Mode::Delay {
            each_way: ms(200),
            jitter: Duration::ZERO,
        });
    }
    let err = lock.extend(ms(1000)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    history.revalidated(a_grant, Instant::now(), lock.remaining());
    eprintln!("t30: after the failed extend A reads {:?} left", lock.remaining());
    let b_requested = Instant::now();
    let b_lock = b
        .acquire(&resource, LockOptions::new(ms(5000)).wait(ms(5000)))
        .await
        .expect("B takes nodes 2 and 3 once the shorter ttl ran out there");
    history.record(Grant::new(
        "B",
        &resource,
        b_requested,
        Instant::now(),
        b_lock.remaining(),
        ms(5000),
        b_lock.fencing_token(),
    ));
    assert!(
        !lock.is_held(),
        "A still reads is_held() with {:?} left",
        lock.remaining()
    );
    assert_no_violations(&history.check(&CheckOptions::default()));
    b_lock.release().await.unwrap();
}

/// T30b: an extend to a ttl shorter than its own round trip. The request
/// lands (700 ms each way), the key expires 300 ms later, and the reply is
/// still on its way: while the extend is under way, the lock must already
/// count with the ttl it may have set, not read as held on the old lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t30b_an_extend_under_way_counts_with_its_shorter_ttl() {
    let node = RedisNode::start(&NodeOptions::default());
    let proxy = FaultProxy::start(node.port());
    let client = builder_for([proxy.url()])
        .node_timeout(ms(3000))
        .connect_timeout(ms(5000))
        .build()
        .await
        .unwrap();
    let lock = client
        .acquire("t30b", LockOptions::new(ms(20_000)).auto_renew(false))
        .await
        .unwrap();
    proxy.set(Mode::Delay {
        each_way: ms(700),
        jitter: Duration::ZERO,
    });
    let started = Instant::now();
    let watch = async {
        // The extend lands at about 700 ms; the key expires about 300 ms later.
        let gone = wait_until(ms(3000), || get(&node, &lock_key("t30b")).is_none()).await;
        (gone, started.elapsed(), lock.is_held(), lock.remaining())
    };
    let (result, (gone, expired_after, held, remaining)) = tokio::join!(lock.extend(ms(300)), watch);
    eprintln!(
        "t30b: key gone after {expired_after:?} (held then: {held}, {remaining:?} left); extend answered after {:?}: {result:?}",
        started.elapsed()
    );
    assert!(gone, "the shorter ttl never took effect");
    assert!(
        expired_after + ms(100) < started.elapsed(),
        "the reply came before the key expired: the race under test did not happen"
    );
    assert!(
        !held,
        "the key is gone, yet the lock read as held with {remaining:?} left"
    );
}

//! The holder's own process fails: crash, pause, plain expiry
//! (reliability.md T04, T05, T14 with T17), and T17's check-and-set
//! variant of fencing.

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
            // Poll until the contender wins; it must be after A's validity and by
            // ttl + 150 ms (the node expires the key at ttl; the rest is polling
            // and round trips on a busy machine).
            let contender = loop {
                if let Ok((lock, _)) =
                    acquire_recorded(&client, &history, "B", &resource, fixed.clone(), ttl).await
                {
                    break lock;
                }
                assert!(
                    acquired.elapsed() < ttl + ms(150),
                    "n={n}: lock not free {ttl:?} + 150 ms after grant"
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

/// T17, antirez's check-and-set variant of fencing: the storage (a separate
/// Redis node) keeps an `owner` next to the protected value. Right after
/// acquiring, a holder *claims* the resource (`owner = its fencing token`,
/// only if the stored owner is older), and every write succeeds only while
/// `owner` still equals the writer's token. Each run: A acquires (ttl
/// 200 ms, no renewal), claims and writes; A's lease runs out; B acquires,
/// is refused a write before it claims, claims and writes; then A, which
/// does not look at its lock (as a paused process would not), writes again,
/// tries to claim again, and sends a plain fenced write (`FENCED_SET`,
/// token ≥ stored fence) for comparison. Every stale write and stale claim
/// must be refused and the storage must keep B's value: 20 runs in CI, 100
/// long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t17_check_and_set_storage_refuses_the_expired_holder() {
    let runs = scale("t17_cas", 20, 100);
    let started = Instant::now();
    let mut nodes = RedisNode::start_many(4, &NodeOptions::default());
    let storage = nodes.pop().unwrap();
    let urls: Vec<String> = nodes.iter().map(RedisNode::url).collect();
    let build = |urls: Vec<String>| {
        builder_for(urls)
            .node_timeout(GENEROUS_NODE_TIMEOUT)
            .retry(RetryPolicy::new(ms(5), ms(20)))
            .build()
    };
    let (a, b) = (build(urls.clone()).await.unwrap(), build(urls).await.unwrap());
    // Plain fenced writes go to the first node of a client: the storage.
    let fenced = build(vec![storage.url()]).await.unwrap();
    let mut store = CasStore::connect(&storage).await;
    let ttl = ms(200);
    let fixed = LockOptions::new(ttl).auto_renew(false).wait(ms(3000));
    let mut stale = StaleCounts::default();
    for run in 0..runs {
        let resource = format!("t17:{run}");
        let (data, fenced_data) = (format!("data:t17:cas:{run}"), format!("data:t17:fenced:{run}"));
        let lock_a = a.acquire(&resource, fixed.clone()).await.unwrap();
        let token_a = lock_a.fencing_token();
        assert!(
            store.claim(&data, token_a).await,
            "run {run}: A's claim of a new resource"
        );
        assert!(
            store.write(&data, token_a, "A").await,
            "run {run}: A's write as owner"
        );
        fenced.fenced_set(&fenced_data, "A", token_a).await.unwrap();

        // A's lease runs out (no renewal); B gets the lock once the keys expire.
        assert!(
            wait_until(ttl + ms(2000), || !lock_a.is_held()).await,
            "run {run}: A's lease without renewal did not end"
        );
        let lock_b = b
            .acquire(&resource, fixed.clone())
            .await
            .unwrap_or_else(|e| panic!("run {run}: B never got the expired lock: {e}"));
        let token_b = lock_b.fencing_token();
        assert!(
            token_b > token_a,
            "run {run}: B's token {token_b} ≤ A's {token_a}"
        );
        if store.write(&data, token_b, "B-unclaimed").await {
            stale.unclaimed_writes += 1;
        }
        assert!(
            store.claim(&data, token_b).await,
            "run {run}: B's claim over A's older one"
        );
        assert!(
            store.write(&data, token_b, "B").await,
            "run {run}: B's write as owner"
        );
        fenced.fenced_set(&fenced_data, "B", token_b).await.unwrap();

        // A wakes up and writes without looking at its lock.
        if store.write(&data, token_a, "A-late").await {
            stale.cas_writes += 1;
        }
        if store.claim(&data, token_a).await {
            stale.claims += 1;
        }
        match fenced.fenced_set(&fenced_data, "A-late", token_a).await {
            Ok(()) => stale.fenced_writes += 1,
            Err(e) => assert_eq!(e.kind(), ErrorKind::StaleToken, "run {run}: {e}"),
        }
        assert_eq!(
            store.read(&data).await,
            (Some("B".to_owned()), Some(token_b)),
            "run {run}: value and owner after A's stale attempts"
        );
        assert_eq!(
            fenced.fenced_get(&fenced_data).await.unwrap(),
            Some(("B".to_owned(), token_b)),
            "run {run}: fenced value after A's stale write"
        );
        assert!(lock_b.is_held(), "run {run}: B lost the lock during the run");
        lock_b.release().await.unwrap();
        assert_eq!(
            lock_a.release().await.map_err(|e| e.kind()),
            Err(ErrorKind::NotHeld)
        );
    }
    eprintln!(
        "t17_cas: {runs} runs in {:?}; accepted stale writes: check-and-set {}/{runs}, \
         FENCED_SET {}/{runs}; accepted stale re-claims {}/{runs}; \
         B's writes before its claim accepted {}/{runs}",
        started.elapsed(),
        stale.cas_writes,
        stale.fenced_writes,
        stale.claims,
        stale.unclaimed_writes
    );
    assert_eq!(stale.cas_writes, 0, "check-and-set storage accepted stale writes");
    assert_eq!(stale.fenced_writes, 0, "FENCED_SET accepted stale writes");
    assert_eq!(stale.claims, 0, "a stale holder re-claimed the resource");
    assert_eq!(
        stale.unclaimed_writes, 0,
        "a write passed without the owner's token"
    );
}

/// What got through in T17's check-and-set runs (each must stay 0).
#[derive(Default)]
struct StaleCounts {
    cas_writes: u32,
    fenced_writes: u32,
    claims: u32,
    unclaimed_writes: u32,
}

/// The storage side of antirez's check-and-set variant: a hash with fields
/// `owner` (a fencing token, canonical decimal) and `value`.
struct CasStore {
    connection: redis::aio::MultiplexedConnection,
    claim: redis::Script,
    write: redis::Script,
}

impl CasStore {
    /// `CLAIM(KEYS = {data}, ARGV = {token})`: `owner = token` unless the
    /// stored owner is newer (the same token may claim again). Tokens stay
    /// below 2^53, so Lua's numbers compare them exactly.
    const CLAIM: &str = r"
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and tonumber(owner) > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1])
return 1
";

    /// `WRITE(KEYS = {data}, ARGV = {token, value})`: only while the owner
    /// is the writer.
    const WRITE: &str = r"
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'value', ARGV[2])
return 1
";

    async fn connect(node: &RedisNode) -> CasStore {
        let connection = redis::Client::open(node.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        CasStore {
            connection,
            claim: redis::Script::new(Self::CLAIM),
            write: redis::Script::new(Self::WRITE),
        }
    }

    async fn claim(&mut self, key: &str, token: u64) -> bool {
        let accepted: i64 = self
            .claim
            .key(key)
            .arg(token)
            .invoke_async(&mut self.connection)
            .await
            .unwrap();
        accepted == 1
    }

    async fn write(&mut self, key: &str, token: u64, value: &str) -> bool {
        let accepted: i64 = self
            .write
            .key(key)
            .arg(token)
            .arg(value)
            .invoke_async(&mut self.connection)
            .await
            .unwrap();
        accepted == 1
    }

    /// `(value, owner)`.
    async fn read(&mut self, key: &str) -> (Option<String>, Option<u64>) {
        redis::cmd("HMGET")
            .arg(key)
            .arg("value")
            .arg("owner")
            .query_async(&mut self.connection)
            .await
            .unwrap()
    }
}

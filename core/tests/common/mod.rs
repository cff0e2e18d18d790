//! Shared helpers for the integration tests: clients over harness nodes.
#![allow(dead_code, missing_docs)]

use std::time::Duration;

use std::time::Instant;

use fencelock::{Client, ClientBuilder, LockOptions, LockStatus};
// Not every test binary uses every one of these.
#[allow(unused_imports)]
pub use fencelock_harness::{FaultProxy, Mode, NodeOptions, RedisNode};

/// Short per-node timeout: every node is on loopback.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(100);

/// For tests that are not about timeouts: a busy CI machine must not turn a
/// slow answer into a timed-out node and change the outcome under test.
pub const GENEROUS_NODE_TIMEOUT: Duration = Duration::from_secs(5);

pub fn builder(nodes: &[RedisNode]) -> ClientBuilder {
    Client::builder()
        .nodes(nodes.iter().map(RedisNode::url))
        .node_timeout(NODE_TIMEOUT)
        .connect_timeout(Duration::from_millis(300))
}

pub async fn client(nodes: &[RedisNode]) -> Client {
    builder(nodes).build().await.expect("client builds")
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Polls `check` every 10 ms until it holds or `limit` passes; returns its
/// last answer. For effects that land after a call returns (late grants, an
/// attempt's clean-up), which a loaded machine may delay: a deadline, not a
/// fixed sleep. Async, so the client's connections keep being driven.
pub async fn wait_until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return check();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// [`wait_until`] for "our token is gone" after a failed attempt: before
/// each check, one round trip through `client`'s own connections
/// (`inspect`). A request the attempt queued earlier on a connection (a
/// grant still on its way) has run once that returns, so a node cannot look
/// clean just because the grant has not landed yet.
pub async fn wait_until_settled(
    client: &Client,
    resource: &str,
    limit: Duration,
    mut check: impl FnMut() -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        // Errors (a node still down) only mean no barrier on that node.
        let _ = client.inspect(resource).await;
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return check();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A lock on `{resource}-N` held on every node, not just a majority.
/// Acquire returns once a majority granted and carries the grant to the
/// other nodes in the background, so a test that takes nodes away from a
/// lock must first wait until it sits on all of them (up to 5 tries on fresh
/// names, should a node time out).
pub async fn acquire_everywhere(
    client: &Client,
    nodes: &[RedisNode],
    resource: &str,
    options: fencelock::LockOptions,
) -> fencelock::Lock {
    for attempt in 0..5 {
        let name = format!("{resource}-{attempt}");
        let lock = client.acquire(&name, options.clone()).await.expect("acquire");
        let everywhere = wait_until_settled(client, &name, Duration::from_millis(500), || {
            nodes.iter().all(|node| get(node, &lock_key(&name)).is_some())
        })
        .await;
        if everywhere {
            return lock;
        }
        lock.release().await.expect("release");
    }
    panic!(
        "no acquire of {resource} reached all {} nodes in 5 tries",
        nodes.len()
    );
}

/// The lock key of `resource` under the default prefix.
pub fn lock_key(resource: &str) -> String {
    format!("fencelock:{{{resource}}}")
}

/// The queue and leases keys of `resource`'s waiters under the default
/// prefix (docs/protocol.md §2.1).
pub fn queue_keys(resource: &str) -> (String, String) {
    let lock = lock_key(resource);
    (format!("{lock}:queue"), format!("{lock}:leases"))
}

/// Queues `waiter` on `node` for `resource` behind the protocol's back,
/// with `ticket` (a real waiter's is at least 1, so 0 puts it first) and a
/// lease that never runs out.
pub fn queue_waiter(node: &RedisNode, resource: &str, waiter: &str, ticket: u64) {
    let (queue, leases) = queue_keys(resource);
    node.command(&["ZADD", &queue, &ticket.to_string(), waiter]);
    node.command(&["ZADD", &leases, "99999999999999", waiter]);
}

/// What a node stores at `key`, as a string (None when absent).
pub fn get(node: &RedisNode, key: &str) -> Option<String> {
    match node.command(&["GET", key]) {
        redis::Value::Nil => None,
        redis::Value::BulkString(bytes) => Some(String::from_utf8(bytes).unwrap()),
        other => panic!("unexpected GET reply {other:?}"),
    }
}

pub fn pttl(node: &RedisNode, key: &str) -> i64 {
    match node.command(&["PTTL", key]) {
        redis::Value::Int(n) => n,
        other => panic!("unexpected PTTL reply {other:?}"),
    }
}

/// Keys under the default prefix on a node (lock keys and counters).
pub fn lock_keys_on(node: &RedisNode) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("fencelock:*")
        .query(&mut node.connection())
        .unwrap();
    keys.into_iter().filter(|k| !k.ends_with(":fence")).collect()
}

/// 8 tasks on each of 2 client instances do a non-atomic read-modify-write of
/// a counter under one lock; the counter must end exact and tokens must rise.
pub async fn exact_counter(nodes: &[RedisNode]) {
    use fencelock::LockOptions;
    const TASKS: usize = 8;
    const ROUNDS: usize = 10;
    let clients = [client(nodes).await, client(nodes).await];
    let data = nodes[0].url();
    let mut tasks = Vec::new();
    for client in &clients {
        for _ in 0..TASKS {
            let client = client.clone();
            let data = data.clone();
            tasks.push(tokio::spawn(async move {
                let store = redis::Client::open(data).unwrap();
                let mut conn = store.get_multiplexed_async_connection().await.unwrap();
                let mut tokens = Vec::new();
                for _ in 0..ROUNDS {
                    let lock = client
                        .acquire("counter", LockOptions::new(ms(2000)).wait(ms(30_000)))
                        .await
                        .expect("acquire under contention");
                    let value: Option<u64> = redis::cmd("GET")
                        .arg("data:counter")
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    tokio::task::yield_now().await;
                    let _: () = redis::cmd("SET")
                        .arg("data:counter")
                        .arg(value.unwrap_or(0) + 1)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    tokens.push(lock.fencing_token());
                    lock.release().await.expect("release");
                }
                tokens
            }));
        }
    }
    let mut all_tokens = Vec::new();
    for task in tasks {
        let tokens = task.await.unwrap();
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "tokens not increasing within a worker: {tokens:?}"
        );
        all_tokens.extend(tokens);
    }
    let total: u64 = redis::cmd("GET")
        .arg("data:counter")
        .query(&mut nodes[0].connection())
        .unwrap();
    assert_eq!(total, (2 * TASKS * ROUNDS) as u64, "lost updates under the lock");
    all_tokens.sort_unstable();
    all_tokens.dedup();
    assert_eq!(all_tokens.len(), 2 * TASKS * ROUNDS, "duplicate fencing tokens");
}

/// How long a lock must survive a disconnect behind a slow link.
const SLOW_TTL: Duration = Duration::from_millis(1500);

/// Holds a lock, resets every connection through `proxy` (then restores its
/// 30 ms delay), and checks the lock stays held for 3 ttl and a new acquire
/// succeeds. Shared with the TLS variant in tls.rs.
pub async fn lock_survives_a_disconnect(client: &Client, proxy: &FaultProxy, resource: &str) {
    let lock = client
        .acquire(resource, LockOptions::new(SLOW_TTL).wait(ms(2000)))
        .await
        .unwrap();
    proxy.set(Mode::Reset);
    tokio::time::sleep(ms(50)).await;
    proxy.set(Mode::Delay {
        each_way: ms(30),
        jitter: Duration::ZERO,
    });
    let until = Instant::now() + SLOW_TTL * 3;
    while Instant::now() < until {
        assert_eq!(
            lock.status(),
            LockStatus::Held,
            "the lock was lost after a disconnect: the node never came back"
        );
        tokio::time::sleep(ms(50)).await;
    }
    assert!(lock.renewals() >= 3, "renewals stopped: {}", lock.renewals());
    let second = client
        .acquire(
            &format!("{resource}:second"),
            LockOptions::new(SLOW_TTL).wait(ms(2000)),
        )
        .await
        .expect("a new acquire after the reconnect");
    second.release().await.unwrap();
    lock.release().await.unwrap();
}

/// A protocol script's SHA1 by its name in tests/vectors/protocol.json
/// (`ACQUIRE`, `RAISE_FENCE`, …), as every front calls it.
pub fn script_sha(name: &str) -> &'static str {
    let vectors: serde_json::Value =
        serde_json::from_str(include_str!("../../../tests/vectors/protocol.json")).expect("valid JSON");
    let sha = vectors["scripts"][name]
        .as_str()
        .unwrap_or_else(|| panic!("no SHA1 for script {name} in the vectors"));
    String::leak(sha.to_owned())
}

/// Subscribers of election `name`'s channel on `node` (a Redis Cluster
/// node counts its own).
pub fn leader_observers(node: &RedisNode, name: &str) -> i64 {
    match node.command(&["PUBSUB", "NUMSUB", &format!("fencelock:leader:{name}")]) {
        redis::Value::Array(reply) => match reply.get(1) {
            Some(redis::Value::Int(n)) => *n,
            other => panic!("unexpected NUMSUB count {other:?}"),
        },
        other => panic!("unexpected NUMSUB reply {other:?}"),
    }
}

/// `a` releases `lock` and takes `resource` back with a zero-wait attempt,
/// `fencelock::MAX_RETAKES` times in a row: each re-take is granted, with a
/// larger token, while `waiter_granted` (the waiter behind it) stays unset.
/// Returns the last re-take's lock.
pub async fn retake_until_the_last(
    a: &Client,
    resource: &str,
    mut lock: fencelock::Lock,
    waiter_granted: &std::sync::atomic::AtomicBool,
) -> fencelock::Lock {
    use std::sync::atomic::Ordering;
    for retake in 1..=fencelock::MAX_RETAKES {
        let token = lock.fencing_token();
        lock.release().await.unwrap();
        // Without waiting: the release is on each node's connection ahead
        // of this attempt, so the key is reserved for it when it lands.
        lock = a
            .try_acquire(resource, LockOptions::new(Duration::from_secs(10)))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("re-take {retake} refused"));
        assert!(lock.fencing_token() > token, "re-take {retake}: tokens must rise");
        assert!(
            !waiter_granted.load(Ordering::SeqCst),
            "the waiter got the lock during re-take {retake}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    lock
}

/// Re-takes on one node reached through `clients` (four clients of it, say
/// of a Redis Cluster or a PostgreSQL node): client `a` waits behind
/// another holder, and again right after its release behind a second one
/// (a contended grant asked for right after a release, whose release may
/// linger); a fourth client waits behind it. Then `a` takes the lock back
/// [`retake_until_the_last`], with no wake-up sent meanwhile (`wakes`
/// counts them), and its last release hands the lock to the waiter within
/// 500 ms. `one_in_line` says whether exactly one waiter is in line.
pub async fn retakes_run_out_then_the_waiter_is_served(
    clients: [Client; 4],
    resource: &str,
    one_in_line: impl Fn() -> bool,
    wakes: impl Fn() -> u64,
) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let options = |wait: u64| LockOptions::new(Duration::from_secs(10)).wait(Duration::from_millis(wait));
    let queued = || async {
        assert!(
            wait_until(Duration::from_secs(10), &one_in_line).await,
            "nobody in line"
        )
    };
    let [a, first, b, c] = clients;
    let first = first.acquire(resource, options(0)).await.unwrap();
    let a_waits = {
        let (a, name) = (a.clone(), resource.to_owned());
        tokio::spawn(async move { a.acquire(&name, options(10_000)).await.unwrap() })
    };
    queued().await;
    first.release().await.unwrap();
    let held = a_waits.await.unwrap();
    let name = resource.to_owned();
    let in_between = tokio::spawn(async move {
        let lock = b.acquire(&name, options(10_000)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        lock.release().await.unwrap();
    });
    queued().await;
    held.release().await.unwrap();
    let lock = a.acquire(resource, options(10_000)).await.unwrap();
    in_between.await.unwrap();
    let granted = Arc::new(AtomicBool::new(false));
    let (flag, name) = (granted.clone(), resource.to_owned());
    let waiter = tokio::spawn(async move {
        let lock = c.acquire(&name, options(20_000)).await.unwrap();
        flag.store(true, Ordering::SeqCst);
        lock
    });
    queued().await;
    let wakes_before = wakes();
    let lock = retake_until_the_last(&a, resource, lock, &granted).await;
    assert_eq!(wakes(), wakes_before, "a re-take woke a waiter");
    let released = Instant::now();
    lock.release().await.unwrap();
    assert!(
        a.try_acquire(resource, options(0)).await.unwrap().is_none(),
        "the holder took the lock back after its re-takes ran out"
    );
    let last = waiter.await.unwrap();
    assert!(
        released.elapsed() < Duration::from_millis(500),
        "the waiter was served {:?} after the last release",
        released.elapsed()
    );
    last.release().await.unwrap();
}

/// The clients after `holder` queue up behind it for `resource`, one after
/// the other (each once `in_line` counts it), and each releases as soon as
/// it holds. Returns the order of the grants (indices into `waiters`).
pub async fn served_in_order(
    holder: Client,
    waiters: Vec<Client>,
    resource: &str,
    fair: bool,
    in_line: impl Fn() -> usize,
) -> Vec<usize> {
    use std::sync::{Arc, Mutex};
    let ttl = Duration::from_secs(10);
    let holder = holder.acquire(resource, LockOptions::new(ttl)).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, client) in waiters.into_iter().enumerate() {
        let (order, name) = (order.clone(), resource.to_owned());
        tasks.push(tokio::spawn(async move {
            let options = LockOptions::new(ttl).wait(Duration::from_secs(20)).fair(fair);
            let lock = client.acquire(&name, options).await.unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(2)).await;
            lock.release().await.unwrap();
        }));
        // Arrival order: each waiter's first attempt lands before the next starts.
        let queued = wait_until(Duration::from_secs(10), || in_line() == i + 1).await;
        assert!(queued, "waiter {i} never entered the queue");
    }
    holder.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    order.lock().unwrap().clone()
}

/// Runs `future` to completion on this thread, off any tokio runtime (as a
/// front's own thread does).
pub fn block_off_runtime<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut context = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

/// Every wake-up a node publishes (`fencelock:wake:*`, docs/protocol.md
/// §4.9), seen by a pattern subscriber on a thread of its own. The
/// subscriber counts as a listener on every waiter's channel, so while it
/// listens no release skips a waiter as gone.
pub struct WakeTap {
    messages: std::sync::mpsc::Receiver<String>,
}

impl WakeTap {
    /// Subscribes and returns once the subscription is in place.
    pub fn start(node: &RedisNode) -> Self {
        let mut connection = node.connection();
        let (sender, messages) = std::sync::mpsc::channel();
        let (subscribed, ready) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut pubsub = connection.as_pubsub();
            pubsub.psubscribe("fencelock:wake:*").unwrap();
            pubsub.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            subscribed.send(()).unwrap();
            // Ends once the tap is dropped and a message comes, or the
            // node is gone.
            loop {
                match pubsub.get_message() {
                    Ok(message) => {
                        let payload: String = message.get_payload().unwrap();
                        if sender.send(payload).is_err() {
                            return;
                        }
                    }
                    Err(error) if error.is_timeout() => {}
                    Err(_) => return,
                }
            }
        });
        ready.recv().unwrap();
        Self { messages }
    }

    /// Waits up to `limit` for a wake-up naming `waiter` (messages are
    /// `<waiter id> <key>`), dropping the others.
    pub async fn saw(&self, waiter: &str, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            while let Ok(message) = self.messages.try_recv() {
                if message.split(' ').next() == Some(waiter) {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }
}

/// The members of a sorted set on `node`, in order.
pub fn members(node: &RedisNode, key: &str) -> Vec<String> {
    match node.command(&["ZRANGE", key, "0", "-1"]) {
        redis::Value::Array(items) => items
            .into_iter()
            .map(|member| redis::from_redis_value::<String>(member).unwrap())
            .collect(),
        other => panic!("unexpected ZRANGE reply {other:?}"),
    }
}

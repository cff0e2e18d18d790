//! Section 4: a hand-off, from a holder's release to the grant of a client
//! that waits for the lock, beside a BARE PUSH floor: the same hand-off
//! through the `redis` crate with nothing but what a push needs (the
//! holder's compare-and-delete `PUBLISH`es a wake-up on each node; the
//! waiter, subscribed on each node, tries `SET NX` once a quorum of them
//! came). Both waiters queue (or try once) well before the release, so each
//! sample is one release, one wake-up and one quorum round trip, after the
//! holder held the lock, idle, for that while.
//!
//! Beside them, one bare `PING` right after another and one after the same
//! idle pause: what this machine charges a round trip from a process that
//! slept, which a hand-off's release pays here.
//!
//! One hand-off at a time, on idle nodes: the issue's hand-off targets are
//! for a contended lock (`bench/contention/`), and are printed here only as
//! a reference.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencelock::{Client, LockOptions};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use tokio::sync::{Mutex, mpsc};

use crate::floor::{connect, load};
use crate::measure::CYCLE_TTL;
use crate::target::verdict;
use crate::util::{micros, quantile, ratio};

/// Hand-offs per node count, for fencelock and the floor each (alternated),
/// after one of each that warms connections and scripts up.
const SAMPLES: usize = 150;
/// How long the waiter waits, queued, before the holder releases.
const QUEUED: Duration = Duration::from_millis(30);
/// The issue's target for the hand-off p50 at 1 node.
const TARGET_ONE_NODE: Duration = Duration::from_millis(1);
/// The issue's target for the hand-off p50 at 5 nodes.
const TARGET_MANY_NODES: Duration = Duration::from_millis(2);

/// The bare holder's release: compare-and-delete, then the wake-up.
const BARE_RELEASE_AND_WAKE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', 'bare-wake', KEYS[1])
  return 1
end
return 0
"#;

/// Each sample's release-to-grant time, for one node count.
pub struct HandOffResult {
    nodes: usize,
    ours: Vec<Duration>,
    floor: Vec<Duration>,
}

/// A bare `PING`'s round trip right after another, and after [`QUEUED`] idle.
pub struct IdleResult {
    hot: Vec<Duration>,
    idle: Vec<Duration>,
}

/// Measures [`SAMPLES`] hand-offs through fencelock and the floor, alternated.
pub async fn hand_offs(urls: &[String]) -> HandOffResult {
    let build = || Client::builder().nodes(urls.iter()).build();
    let holder = build().await.expect("connect the holder");
    let waiter = build().await.expect("connect the waiter");
    let bare = BarePair::connect(urls).await;
    let nodes = urls.len();
    let (mut ours, mut floor) = (Vec::new(), Vec::new());
    for sample in 0..=SAMPLES {
        let our_time = our_hand_off(&holder, &waiter, &format!("handoff:{nodes}:{sample}")).await;
        let floor_time = bare.hand_off(&format!("bare-handoff:{nodes}:{sample}")).await;
        // The first of each warms up connections and scripts.
        if sample > 0 {
            ours.push(our_time);
            floor.push(floor_time);
        }
    }
    ours.sort();
    floor.sort();
    HandOffResult { nodes, ours, floor }
}

/// One fencelock hand-off: the waiter queued, then the holder's release.
/// The holder never waited for its lock, so its release hands off rather
/// than keeping the lock for a re-take of its own.
async fn our_hand_off(holder: &Client, waiter: &Client, resource: &str) -> Duration {
    let options = LockOptions::new(CYCLE_TTL).wait(CYCLE_TTL);
    let lock = holder
        .acquire(resource, options.clone())
        .await
        .expect("the holder's acquire");
    let waiting = {
        let (waiter, resource) = (waiter.clone(), resource.to_owned());
        tokio::spawn(async move {
            let lock = waiter
                .acquire(&resource, options)
                .await
                .expect("the waiter's acquire");
            let granted = Instant::now();
            lock.release().await.expect("the waiter's release");
            granted
        })
    };
    tokio::time::sleep(QUEUED).await;
    let released = Instant::now();
    lock.release().await.expect("the holder's release");
    let granted = waiting.await.expect("the waiter's task");
    granted.saturating_duration_since(released)
}

/// The floor's two clients: each with its own connection to every node, the
/// waiter also subscribed to the wake-up channel on every node.
struct BarePair {
    holder: Vec<MultiplexedConnection>,
    waiter: Vec<MultiplexedConnection>,
    /// (node index, key) of each wake-up, from every node's subscription;
    /// shared with the task that waits for them.
    wakeups: Arc<Mutex<mpsc::UnboundedReceiver<(usize, String)>>>,
    release_sha: String,
}

impl BarePair {
    /// Connects both clients to every node, subscribes the waiter and loads
    /// the holder's release.
    async fn connect(urls: &[String]) -> BarePair {
        let (sender, receiver) = mpsc::unbounded_channel();
        let (mut holder, mut waiter) = (Vec::new(), Vec::new());
        let mut release_sha = String::new();
        for (index, url) in urls.iter().enumerate() {
            let client = redis::Client::open(url.as_str()).expect("a valid node URL");
            let mut holder_connection = connect(&client).await;
            release_sha = load(&mut holder_connection, BARE_RELEASE_AND_WAKE).await;
            holder.push(holder_connection);
            waiter.push(connect(&client).await);
            forward_wakeups(&client, index, sender.clone()).await;
        }
        BarePair {
            holder,
            waiter,
            wakeups: Arc::new(Mutex::new(receiver)),
            release_sha,
        }
    }

    /// The holder takes `key`; the waiter tries it once (refused), then waits
    /// for a quorum of wake-ups and takes it; the time from the holder's
    /// release to the waiter's grant.
    async fn hand_off(&self, key: &str) -> Duration {
        let ttl_ms = CYCLE_TTL.as_millis().to_string();
        let set = |token: &str| {
            redis::cmd("SET")
                .arg(key)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(&ttl_ms)
                .clone()
        };
        assert!(
            quorum_of(&self.holder, &set("holder")).await,
            "the bare holder's SET NX"
        );
        assert!(
            !quorum_of(&self.waiter, &set("waiter")).await,
            "the bare waiter's first try is refused"
        );
        let waiting = {
            let (connections, wakeups, set) = (self.waiter.clone(), self.wakeups.clone(), set("waiter"));
            let key = key.to_owned();
            tokio::spawn(async move {
                // Bounded like fencelock's waiter: a lost subscription fails
                // the run instead of hanging it.
                tokio::time::timeout(
                    CYCLE_TTL,
                    await_wakeups(&wakeups, &key, connections.len() / 2 + 1),
                )
                .await
                .expect("the bare waiter's wake-ups from a quorum of nodes");
                assert!(
                    quorum_of(&connections, &set).await,
                    "the bare waiter's SET NX after its wake-ups"
                );
                Instant::now()
            })
        };
        tokio::time::sleep(QUEUED).await;
        let release = redis::cmd("EVALSHA")
            .arg(&self.release_sha)
            .arg(1)
            .arg(key)
            .arg("holder")
            .clone();
        let released = Instant::now();
        assert!(
            quorum_of(&self.holder, &release).await,
            "the bare holder's release"
        );
        let granted = waiting.await.expect("the bare waiter's task");
        let _ = quorum_of(&self.waiter, &redis::cmd("DEL").arg(key).clone()).await;
        granted.saturating_duration_since(released)
    }
}

/// Subscribes to the wake-up channel on `client`'s node and forwards each
/// message's key, with the node's `index`, to `sender`.
async fn forward_wakeups(
    client: &redis::Client,
    index: usize,
    sender: mpsc::UnboundedSender<(usize, String)>,
) {
    let mut subscription = client
        .get_async_pubsub()
        .await
        .expect("subscribe the bare waiter");
    subscription.subscribe("bare-wake").await.expect("SUBSCRIBE");
    tokio::spawn(async move {
        let mut messages = subscription.on_message();
        while let Some(message) = messages.next().await {
            let key: String = message.get_payload().unwrap_or_default();
            if sender.send((index, key)).is_err() {
                return;
            }
        }
    });
}

/// Waits for wake-ups about `key` from `needed` distinct nodes.
async fn await_wakeups(wakeups: &Mutex<mpsc::UnboundedReceiver<(usize, String)>>, key: &str, needed: usize) {
    let mut wakeups = wakeups.lock().await;
    let mut from = Vec::new();
    while from.len() < needed {
        let (node, woken) = wakeups.recv().await.expect("the wake-up subscriptions");
        if woken == key && !from.contains(&node) {
            from.push(node);
        }
    }
}

/// Sends `command` to every node; true once a quorum said yes (`OK` or
/// a positive integer), false once a quorum can no longer say it.
async fn quorum_of(connections: &[MultiplexedConnection], command: &redis::Cmd) -> bool {
    let quorum = connections.len() / 2 + 1;
    let mut replies: FuturesUnordered<_> = connections
        .iter()
        .map(|connection| {
            let mut connection = connection.clone();
            async move {
                let reply: redis::RedisResult<redis::Value> = command.query_async(&mut connection).await;
                matches!(reply, Ok(redis::Value::Okay) | Ok(redis::Value::Int(1..)))
            }
        })
        .collect();
    let (mut yes, mut no) = (0, 0);
    while let Some(said_yes) = replies.next().await {
        if said_yes {
            yes += 1;
        } else {
            no += 1;
        }
        if yes >= quorum {
            return true;
        }
        if no > connections.len() - quorum {
            return false;
        }
    }
    false
}

/// A bare `PING` right after another, and after the waiter's idle pause.
pub async fn idle_round_trips(url: &str) -> IdleResult {
    let client = redis::Client::open(url).expect("a valid node URL");
    let mut connection = connect(&client).await;
    let (mut hot, mut idle) = (Vec::new(), Vec::new());
    for _ in 0..SAMPLES {
        tokio::time::sleep(QUEUED).await;
        idle.push(ping(&mut connection).await);
        hot.push(ping(&mut connection).await);
    }
    hot.sort();
    idle.sort();
    IdleResult { hot, idle }
}

/// One `PING`'s round trip.
async fn ping(connection: &mut MultiplexedConnection) -> Duration {
    let sent = Instant::now();
    let _: String = redis::cmd("PING").query_async(connection).await.expect("PING");
    sent.elapsed()
}

/// Prints section 4: each node count's hand-offs beside the floor's, then
/// the idle round trip.
pub fn print_hand_offs(results: &[HandOffResult], idle: &IdleResult) {
    println!(
        "\n4. A hand-off: a holder's release to the grant of a client that waits for the lock \
         ({SAMPLES} each, the waiter queued {} ms before, fencelock and the floor alternated, \
         one at a time)",
        QUEUED.as_millis()
    );
    println!(
        "   {:>5}  {:>26}  {:>32}  {:>9}  target p50 (issue 17's, for a contended lock)",
        "nodes", "fencelock p10/p50/p90 µs", "bare push floor p10/p50/p90 µs", "p50 ratio"
    );
    for result in results {
        let target = if result.nodes == 1 {
            TARGET_ONE_NODE
        } else {
            TARGET_MANY_NODES
        };
        let ours_p50 = quantile(&result.ours, 0.5);
        println!(
            "   {:>5}  {:>26}  {:>32}  {:>8.2}×  ≤ {} ms {}",
            result.nodes,
            spread(&result.ours),
            spread(&result.floor),
            ratio(micros(ours_p50), micros(quantile(&result.floor, 0.5))),
            target.as_millis(),
            verdict(ours_p50 <= target)
        );
    }
    println!(
        "   a bare PING right after another: p50 {:.0} µs; after {} ms idle: p50 {:.0} µs \
         (a round trip from a process that slept, as a release after a hold is)",
        micros(quantile(&idle.hot, 0.5)),
        QUEUED.as_millis(),
        micros(quantile(&idle.idle, 0.5))
    );
}

/// "p10 / p50 / p90" of `sorted`, in µs.
fn spread(sorted: &[Duration]) -> String {
    let [p10, p50, p90] = [0.1, 0.5, 0.9].map(|q| micros(quantile(sorted, q)));
    format!("{p10:.0} / {p50:.0} / {p90:.0}")
}

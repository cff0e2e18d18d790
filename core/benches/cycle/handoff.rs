//! Section 4: a hand-off, from a holder's release to the grant of a client
//! that waits for the lock, beside a BARE PUSH floor: the same hand-off
//! through the `redis` crate with nothing but what a push needs (the
//! holder's compare-and-delete `PUBLISH`es a wake-up on each node; the
//! waiter, subscribed on each node, tries `SET NX` once a quorum of them
//! came). Both waiters queue (or try once) well before the release, so each
//! sample is one release, one wake-up and one quorum round trip, with the
//! waiter's client idle in between, as a real waiter's is.
//!
//! Beside them, one bare `PING` right after another and one after the same
//! idle pause: what this machine charges a process for waking up, which a
//! hand-off pays at the waiter and a looping holder's re-take does not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencelock::{Client, LockOptions};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use tokio::sync::{Mutex, mpsc};

use crate::measure::CYCLE_TTL;
use crate::target::verdict;
use crate::util::{micros, quantile, ratio};

/// Hand-offs per node count, for fencelock and the floor each (alternated).
const SAMPLES: usize = 150;
/// How long the waiter waits, queued, before the holder releases.
const QUEUED: Duration = Duration::from_millis(30);
/// The issue's targets for the hand-off p50, at 1 node and at 5.
const TARGET_ONE_NODE: Duration = Duration::from_millis(1);
const TARGET_MANY_NODES: Duration = Duration::from_millis(2);

/// The bare holder's release: compare-and-delete, then the wake-up.
const BARE_RELEASE: &str = r#"
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
    let floor = BarePair::connect(urls).await;
    let (mut ours, mut bare) = (Vec::new(), Vec::new());
    for sample in 0..SAMPLES {
        ours.push(our_hand_off(&holder, &waiter, &format!("handoff:{sample}")).await);
        bare.push(floor.hand_off(&format!("bare-handoff:{sample}")).await);
    }
    ours.sort();
    bare.sort();
    HandOffResult {
        nodes: urls.len(),
        ours,
        floor: bare,
    }
}

/// One fencelock hand-off: the waiter queued, then the holder's release.
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
    /// (node index, key) of each wake-up, from every node's subscription.
    wakeups: Arc<Mutex<mpsc::UnboundedReceiver<(usize, String)>>>,
    release_sha: String,
}

impl BarePair {
    async fn connect(urls: &[String]) -> BarePair {
        let (sender, receiver) = mpsc::unbounded_channel();
        let (mut holder, mut waiter) = (Vec::new(), Vec::new());
        for (index, url) in urls.iter().enumerate() {
            let client = redis::Client::open(url.as_str()).expect("a valid node URL");
            holder.push(connect(&client).await);
            waiter.push(connect(&client).await);
            let mut subscription = client
                .get_async_pubsub()
                .await
                .expect("subscribe the bare waiter");
            subscription.subscribe("bare-wake").await.expect("SUBSCRIBE");
            let sender = sender.clone();
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
        let release_sha = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(BARE_RELEASE)
            .query_async(&mut holder[0].clone())
            .await
            .expect("SCRIPT LOAD");
        for connection in &holder[1..] {
            let _: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(BARE_RELEASE)
                .query_async(&mut connection.clone())
                .await
                .expect("SCRIPT LOAD");
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
                await_wakeups(&wakeups, &key, connections.len() / 2 + 1).await;
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

async fn connect(client: &redis::Client) -> MultiplexedConnection {
    client
        .get_multiplexed_async_connection()
        .await
        .expect("connect the floor to a node")
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

async fn ping(connection: &mut MultiplexedConnection) -> Duration {
    let sent = Instant::now();
    let _: String = redis::cmd("PING").query_async(connection).await.expect("PING");
    sent.elapsed()
}

pub fn print_hand_offs(results: &[HandOffResult], idle: &IdleResult) {
    println!(
        "\n4. A hand-off: a holder's release to the grant of a client that waits for the lock \
         ({SAMPLES} each, the waiter queued {} ms before, fencelock and the floor alternated)",
        QUEUED.as_millis()
    );
    println!("   nodes  fencelock p10/p50/p90 µs   bare push floor p10/p50/p90 µs   p50 ratio   target p50");
    for result in results {
        let target = if result.nodes == 1 {
            TARGET_ONE_NODE
        } else {
            TARGET_MANY_NODES
        };
        let ours_p50 = quantile(&result.ours, 0.5);
        println!(
            "   {:>5}  {:>25}   {:>31}   {:>8.2}×   ≤ {} ms {}",
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
         (what waking a process costs here; the waiter pays it, a re-take does not)",
        micros(quantile(&idle.hot, 0.5)),
        QUEUED.as_millis(),
        micros(quantile(&idle.idle, 0.5))
    );
}

fn spread(sorted: &[Duration]) -> String {
    let [p10, p50, p90] = [0.1, 0.5, 0.9].map(|q| micros(quantile(sorted, q)));
    format!("{p10:.0} / {p50:.0} / {p90:.0}")
}

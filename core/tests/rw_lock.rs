//! Read-write locks (docs/protocol.md §4.12): readers share, nothing
//! overlaps a writer, on one node and in quorum mode; writers are not
//! starved by later readers; each reader has its own lease; a writer's
//! fencing token is above every earlier grant's.

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::*;
use fencelock::{ErrorKind, LockOptions, LossReason, RwLock};
use fencelock_harness::{CheckOptions, Grant, History, Violation};
use rand::Rng;

fn options(ttl: u64, wait: u64) -> LockOptions {
    LockOptions::new(ms(ttl)).wait(ms(wait))
}

fn reader_count(node: &RedisNode, name: &str) -> usize {
    match node.command(&["SCARD", &format!("fencelock:{{{name}}}:rw:readers")]) {
        redis::Value::Int(n) => n as usize,
        other => panic!("unexpected SCARD reply {other:?}"),
    }
}

fn writers_waiting(node: &RedisNode, name: &str) -> usize {
    match node.command(&["ZCARD", &format!("fencelock:{{{name}}}:rw:writers")]) {
        redis::Value::Int(n) => n as usize,
        other => panic!("unexpected ZCARD reply {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_a_writer_holds_alone() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let rw = client.rw_lock("doc").unwrap();
    let a = rw.read(options(5_000, 0)).await.unwrap();
    let b = rw
        .try_read(options(5_000, 0))
        .await
        .unwrap()
        .expect("readers share");
    assert_eq!(reader_count(&nodes[0], "doc"), 2);
    assert!(
        rw.try_write(options(5_000, 0)).await.unwrap().is_none(),
        "a writer beside readers"
    );
    a.release().await.unwrap();
    assert!(
        rw.try_write(options(5_000, 0)).await.unwrap().is_none(),
        "a writer beside a reader"
    );
    b.release().await.unwrap();
    let writer = rw.write(options(5_000, 0)).await.unwrap();
    assert!(writer.fencing_token() > b.fencing_token());
    assert!(
        rw.try_read(options(5_000, 0)).await.unwrap().is_none(),
        "a reader beside a writer"
    );
    assert!(
        rw.try_write(options(5_000, 0)).await.unwrap().is_none(),
        "two writers"
    );
    assert_eq!(writer.resource(), "doc");
    assert!(
        client.acquire("doc", options(5_000, 0)).await.is_ok(),
        "a lock of the same name is another thing"
    );
    writer.release().await.unwrap();
    let reader = rw.read(options(5_000, 0)).await.unwrap();
    assert!(reader.fencing_token() > writer.fencing_token());
    reader.release().await.unwrap();
    assert!(client.rw_lock("").is_err());
}

/// Workers read or write at random, holding a few milliseconds; every grant
/// goes into one history checked for readers-or-one-writer and for token order.
async fn contend(nodes: &[RedisNode], name: &str, workers: usize, rounds: usize) -> History {
    let history = History::new();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let client = builder(nodes)
            .node_timeout(GENEROUS_NODE_TIMEOUT)
            .build()
            .await
            .unwrap();
        let rw = client.rw_lock(name).unwrap();
        let history = history.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let write = rand::rng().random_bool(0.3);
                let requested = Instant::now();
                let lock = if write {
                    rw.write(options(2_000, 30_000)).await.unwrap()
                } else {
                    rw.read(options(2_000, 30_000)).await.unwrap()
                };
                let id = history.record(Grant::new(
                    format!("{} {w}", if write { "writer" } else { "reader" }),
                    rw.name(),
                    requested,
                    Instant::now(),
                    lock.remaining(),
                    ms(2_000),
                    lock.fencing_token(),
                ));
                let hold = rand::rng().random_range(0..3);
                tokio::time::sleep(ms(hold)).await;
                history.released(id, Instant::now());
                lock.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    history
}

fn assert_readers_or_one_writer(history: &History, name: &str) {
    let violations = history.read_write_violations(|g| g.client.starts_with("writer"));
    assert!(
        violations.is_empty(),
        "{} violations, first: {}",
        violations.len(),
        violations[0]
    );
    let mut validity = history.check(&CheckOptions::default());
    validity.retain(|v| matches!(v, Violation::Validity { .. }));
    assert!(validity.is_empty(), "{}", validity[0]);
    let writers = history
        .grants()
        .iter()
        .filter(|g| g.client.starts_with("writer"))
        .count();
    let peak = history.max_concurrent(name);
    eprintln!(
        "{name}: {} grants ({writers} writes), at most {peak} at once",
        history.len()
    );
    assert!(
        writers > 0 && peak >= 2,
        "the workload never wrote or never shared: it tests nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_keeps_readers_or_one_writer() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let history = contend(&nodes, "rw1", 8, 30).await;
    assert_eq!(history.len(), 8 * 30);
    assert_readers_or_one_writer(&history, "rw1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_keep_readers_or_one_writer() {
    let nodes = RedisNode::start_many(5, &NodeOptions::default());
    let history = contend(&nodes, "rw5", 6, 20).await;
    assert_eq!(history.len(), 6 * 20);
    assert_readers_or_one_writer(&history, "rw5");
}

/// Readers keep coming, always overlapping; a writer that queues is served
/// after the readers already holding, and no reader that asked after it
/// got in ahead of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_readers_does_not_starve_a_writer() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let history = History::new();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..4 {
        let rw = client(&nodes).await.rw_lock("busy").unwrap();
        let (history, stop) = (history.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            tokio::time::sleep(ms(r * 15)).await;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let requested = Instant::now();
                let lock = rw.read(options(5_000, 10_000)).await.unwrap();
                let id = history.record(Grant::new(
                    format!("reader {r}"),
                    "busy",
                    requested,
                    Instant::now(),
                    lock.remaining(),
                    ms(5_000),
                    lock.fencing_token(),
                ));
                tokio::time::sleep(ms(60)).await;
                history.released(id, Instant::now());
                lock.release().await.unwrap();
            }
        }));
    }
    tokio::time::sleep(ms(200)).await;
    let writer_rw = client(&nodes).await.rw_lock("busy").unwrap();
    let writer = tokio::spawn(async move {
        let requested = Instant::now();
        let lock = writer_rw.write(options(5_000, 10_000)).await.unwrap();
        (requested, Instant::now(), lock)
    });
    assert!(
        wait_until(ms(5_000), || writers_waiting(&nodes[0], "busy") == 1).await,
        "the writer never queued"
    );
    let queued = Instant::now();
    let (_, written, lock) = writer.await.unwrap();
    let waited = written - queued;
    lock.release().await.unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for reader in readers {
        reader.await.unwrap();
    }
    let overtaking: Vec<Grant> = history
        .grants()
        .into_iter()
        .filter(|g| g.requested_at > queued && g.acquired_at < written)
        .collect();
    assert!(
        overtaking.is_empty(),
        "readers that came after the writer went first: {overtaking:?}"
    );
    eprintln!("the writer waited {waited:?} for the readers already in");
}

/// Each reader has its own lease: one that dies frees itself at its ttl,
/// while another keeps renewing; a writer gets in once both are gone, not
/// before the dead one's ttl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_reader_frees_alone_at_its_ttl() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let dead = client(&nodes).await;
    let asked = Instant::now();
    let ttl = ms(700);
    let gone = dead
        .rw_lock("lease")
        .unwrap()
        .read(LockOptions::new(ttl).auto_renew(false))
        .await
        .unwrap();
    std::mem::forget(gone);
    dead.close();
    let live_client = client(&nodes).await;
    let live = live_client
        .rw_lock("lease")
        .unwrap()
        .read(options(1_000, 0))
        .await
        .unwrap();
    let writer = client(&nodes).await.rw_lock("lease").unwrap();
    let waiting = tokio::spawn(async move { writer.write(options(2_000, 5_000)).await });
    tokio::time::sleep(ms(600)).await;
    assert!(
        live.is_held() && live.renewals() >= 1,
        "the live reader renews on its own"
    );
    live.release().await.unwrap();
    let lock = waiting.await.unwrap().unwrap();
    let waited = asked.elapsed();
    assert!(
        waited >= ttl.mul_f64(0.99),
        "the writer got in after {waited:?}, before the dead reader's ttl"
    );
    assert!(waited < ttl + ms(500), "the writer got in only after {waited:?}");
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_writer_is_refused_by_the_store() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let client = client(&nodes).await;
    let rw: RwLock = client.rw_lock("fenced").unwrap();
    let first = rw
        .write(LockOptions::new(ms(200)).auto_renew(false))
        .await
        .unwrap();
    // The first writer "pauses" past its lease; a reader and a second writer follow.
    tokio::time::sleep(ms(300)).await;
    let reader = rw.read(options(2_000, 2_000)).await.unwrap();
    reader.release().await.unwrap();
    let second = rw.write(options(2_000, 2_000)).await.unwrap();
    assert!(second.fencing_token() > reader.fencing_token());
    assert!(reader.fencing_token() > first.fencing_token());
    client
        .fenced_set("data:fenced", "second", second.fence())
        .await
        .unwrap();
    let stale = client
        .fenced_set("data:fenced", "first", first.fence())
        .await
        .unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::StaleToken);
    second.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_signals_its_loss_alone() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let rw = client.rw_lock("lossy").unwrap();
    let a = rw.read(options(1_000, 0)).await.unwrap();
    let b = rw.read(options(1_000, 0)).await.unwrap();
    let keys = match nodes[0].command(&["SMEMBERS", "fencelock:{lossy}:rw:readers"]) {
        redis::Value::Array(keys) => keys,
        other => panic!("unexpected SMEMBERS reply {other:?}"),
    };
    assert_eq!(keys.len(), 2);
    let redis::Value::BulkString(key) = &keys[0] else {
        panic!("a key name")
    };
    nodes[0].command(&["DEL", std::str::from_utf8(key).unwrap()]);
    let (lost, kept) = tokio::select! {
        reason = a.lost() => (reason, &b),
        reason = b.lost() => (reason, &a),
    };
    assert_eq!(lost, LossReason::Deleted);
    tokio::time::sleep(ms(400)).await;
    assert!(kept.is_held(), "the other reader went with it");
}

/// A waiting writer is woken when the last reader releases, and waiting
/// readers when the writer releases: a few script calls, no polling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_wake_the_waiters_in_turn() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let rw = client(&nodes).await.rw_lock("turns").unwrap();
    let reader = rw.read(options(10_000, 0)).await.unwrap();
    let calls_before = nodes[0].command_calls("evalsha") + nodes[0].command_calls("eval");
    let writer_rw = client(&nodes).await.rw_lock("turns").unwrap();
    let writer = tokio::spawn(async move {
        let lock = writer_rw.write(options(10_000, 20_000)).await.unwrap();
        tokio::time::sleep(ms(50)).await;
        lock.release().await.unwrap();
    });
    assert!(wait_until(ms(5_000), || writers_waiting(&nodes[0], "turns") == 1).await);
    let mut late_readers = Vec::new();
    for _ in 0..3 {
        let rw = client(&nodes).await.rw_lock("turns").unwrap();
        late_readers.push(tokio::spawn(async move {
            let lock = rw.read(options(10_000, 20_000)).await.unwrap();
            tokio::time::sleep(ms(20)).await;
            lock.release().await.unwrap();
        }));
    }
    tokio::time::sleep(ms(50)).await;
    reader.release().await.unwrap();
    writer.await.unwrap();
    for task in late_readers {
        task.await.unwrap();
    }
    let calls = nodes[0].command_calls("evalsha") + nodes[0].command_calls("eval") - calls_before;
    // Each of 4 waiters: a queuing attempt, a woken one and a release, and
    // the first reader's release: about 13; polling would make dozens.
    assert!(calls <= 24, "{calls} script calls");
}

/// A writer that gives up while readers hold wakes the reader queued behind
/// it as it leaves: the reader may go in now, and should not have to find
/// out at its next refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_giving_up_wakes_the_reader_queued_behind_it() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let holder = client(&nodes).await;
    let held = holder
        .rw_lock("behind")
        .unwrap()
        .read(options(10_000, 0))
        .await
        .unwrap();
    let writer_client = client(&nodes).await;
    let writer = tokio::spawn(async move {
        let rw = writer_client.rw_lock("behind").unwrap();
        rw.write(options(10_000, 2_000)).await.map(|_| ())
    });
    assert!(wait_until(ms(5_000), || writers_waiting(&nodes[0], "behind") == 1).await);
    let reader_client = client(&nodes).await;
    let reader = tokio::spawn(async move {
        let rw = reader_client.rw_lock("behind").unwrap();
        rw.read(options(10_000, 10_000))
            .await
            .map(|read| (read, reader_client))
    });
    let queue = "fencelock:{behind}:rw:queue";
    assert!(wait_until(ms(5_000), || members(&nodes[0], queue).len() == 2).await);
    let queued = members(&nodes[0], queue);
    let tap = WakeTap::start(&nodes[0]);
    let gave_up = writer
        .await
        .unwrap()
        .expect_err("the readers kept the writer out");
    assert_eq!(gave_up.kind(), ErrorKind::Timeout);
    assert!(
        tap.saw(&queued[1], ms(2_000)).await,
        "the writer left without waking the reader queued behind it"
    );
    let (read, _client) = reader.await.unwrap().expect("the reader got in");
    read.release().await.unwrap();
    held.release().await.unwrap();
}

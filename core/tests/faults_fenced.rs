//! Fenced writes when tokens repeat (docs/reliability.md, T31).
//!
//! Tokens strictly increase only while the nodes keep their counters. With 3
//! nodes and counters a = b = 100, c = 99, one node (b) restarting without
//! persistence is enough for the next grant on {b, c} to get 100 again:
//! less than a majority lost its counter. Storage must then refuse the
//! second holder's writes, while the first may still write again.

mod faults_support;

use std::time::Duration;

use faults_support::*;
use fencelock::{ErrorKind, Fence, LockOptions};

const RESOURCE: &str = "t31";
const DATA: &str = "t31:data";

fn set_counter(node: &RedisNode, value: u64) {
    node.command(&[
        "SET",
        &format!("fencelock:{{{RESOURCE}}}:fence"),
        &value.to_string(),
    ]);
}

/// T31: the planted repeat. A gets token 100 on all three nodes (c's
/// counter lags at 99, so no raise is needed: two nodes reported 100); b
/// restarts empty; A's lease runs out; B, cut off from a, takes b and c and
/// gets 100 again. B's write must be refused (equal token, other grant);
/// A's second write, with its own fence, still goes through; a bare equal
/// token is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t31_an_equal_token_from_another_grant_is_a_stale_write() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let (a_node, b_node, c_node) = (&nodes[0], &nodes[1], &nodes[2]);
    set_counter(a_node, 99);
    set_counter(b_node, 99);
    set_counter(c_node, 98);
    // A reaches c through a slow link, so its grant is decided on a and b
    // (both 100: no raise); had c answered first, T = 100 with one node
    // agreeing would raise c to 100 and leave nothing to plant.
    let slow_c = FaultProxy::start(c_node.port());
    slow_c.set(Mode::Delay {
        each_way: ms(50),
        jitter: Duration::ZERO,
    });
    let a = builder_for([a_node.url(), b_node.url(), slow_c.url()])
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .unwrap();
    let ttl = ms(400);
    let lock_a = a
        .acquire(RESOURCE, LockOptions::new(ttl).auto_renew(false))
        .await
        .unwrap();
    assert_eq!(lock_a.fencing_token(), 100, "planted: a = b = 100, c = 99");
    assert!(
        wait_until_settled(&a, RESOURCE, ms(1000), || get(c_node, &lock_key(RESOURCE))
            .is_some())
        .await,
        "the grant never reached node c"
    );
    // The protected data lives on a node of its own, written by both holders.
    let storage_node = RedisNode::start(&NodeOptions::default());
    let storage = builder_for([storage_node.url()]).build().await.unwrap();
    storage.fenced_set(DATA, "A1", lock_a.fence()).await.unwrap();

    // b restarts without persistence: its key and counter are gone.
    tokio::task::block_in_place(|| b_node.restart());
    tokio::time::sleep(ttl + ms(100)).await;
    assert!(!lock_a.is_held());

    // B cannot reach a.
    let proxies = proxies_for(&nodes);
    proxies[0].set(Mode::Blackhole);
    let b = proxied_client(&proxies).await;
    let lock_b = b
        .acquire(RESOURCE, LockOptions::new(ms(5000)).wait(ms(2000)))
        .await
        .unwrap();
    assert_eq!(
        lock_b.fencing_token(),
        lock_a.fencing_token(),
        "planted: one lost counter repeats the token"
    );
    assert_ne!(lock_b.fence(), lock_a.fence(), "two grants, two holder ids");

    let refused = storage.fenced_set(DATA, "B1", lock_b.fence()).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::StaleToken, "{refused}");
    let bare = storage
        .fenced_set(DATA, "bare", Fence::bare(lock_b.fencing_token()))
        .await
        .unwrap_err();
    assert_eq!(bare.kind(), ErrorKind::StaleToken, "{bare}");
    storage
        .fenced_set(DATA, "A2", lock_a.fence())
        .await
        .expect("the same grant may write again");
    assert_eq!(
        storage.fenced_get(DATA).await.unwrap(),
        Some(("A2".to_owned(), 100))
    );
    // A newer grant still overrides.
    storage.fenced_set(DATA, "B2", Fence::bare(101)).await.unwrap();
    assert_eq!(
        storage.fenced_get(DATA).await.unwrap(),
        Some(("B2".to_owned(), 101))
    );
    lock_b.release().await.unwrap();
}

/// Fences above `i64::MAX` (any `u64` may be written) read back exactly,
/// and a data key with the form of a lock key is refused.
#[tokio::test]
async fn fences_above_i64_read_back_and_lock_keys_are_no_data_keys() {
    let node = RedisNode::start(&NodeOptions::default());
    let client = builder_for([node.url()]).build().await.unwrap();
    let huge = u64::MAX - 1;
    client
        .fenced_set("t31:huge", "v", Fence::bare(huge))
        .await
        .unwrap();
    assert_eq!(
        client.fenced_get("t31:huge").await.unwrap(),
        Some(("v".to_owned(), huge))
    );
    for key in [
        "fencelock:{orders:42}",
        "fencelock:{orders:42}:fence",
        "fencelock:{",
    ] {
        let err = client.fenced_set(key, "x", 1u64).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{key}: {err}");
        let err = client.fenced_get(key).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{key}: {err}");
    }
    client
        .fenced_set("fencelock:data", "outside the lock keys", 1u64)
        .await
        .unwrap();
}

/// What the warnings of this test binary said (one global subscriber).
fn captured_warnings() -> &'static std::sync::Mutex<Vec<u8>> {
    use std::sync::{Mutex, OnceLock};
    static CAPTURED: OnceLock<&'static Mutex<Vec<u8>>> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let buffer: &'static Mutex<Vec<u8>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        struct Sink(&'static Mutex<Vec<u8>>);
        impl std::io::Write for Sink {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || Sink(buffer))
            .init();
        buffer
    })
}

/// T31: a node without AOF is reported once per client with a warning
/// that names it; a client that requires AOF refuses it (`config`, at
/// build), and accepts a node with `appendfsync always` without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_without_aof_are_reported_and_refused_when_aof_is_required() {
    let warnings = captured_warnings();
    let plain = RedisNode::start(&NodeOptions::default());
    let durable = RedisNode::start(&NodeOptions {
        aof: true,
        ..NodeOptions::default()
    });
    let said = || String::from_utf8(warnings.lock().unwrap().clone()).unwrap();

    let lenient = builder_for([plain.url()]).build().await.unwrap();
    let port = format!("127.0.0.1:{}", plain.port());
    let warning = said();
    assert!(
        warning.contains("without AOF") && warning.contains(&port),
        "no warning naming the node: {warning:?}"
    );
    // Other tests of this binary warn about their own nodes meanwhile.
    let about_this_node = warning
        .lines()
        .filter(|line| line.contains("without AOF") && line.contains(&port))
        .count();
    assert_eq!(about_this_node, 1, "warned more than once: {warning}");
    drop(lenient);

    let err = builder_for([plain.url()])
        .require_aof(true)
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(
        err.message().contains(&port) && err.message().contains("appendonly"),
        "{err}"
    );

    warnings.lock().unwrap().clear();
    let strict = builder_for([durable.url()])
        .require_aof(true)
        .build()
        .await
        .unwrap();
    let lock = strict
        .acquire("t31:aof", LockOptions::new(ms(1000)))
        .await
        .unwrap();
    lock.release().await.unwrap();
    let ours = [port.clone(), format!("127.0.0.1:{}", durable.port())];
    let about_our_nodes: Vec<String> = said()
        .lines()
        .filter(|line| ours.iter().any(|node| line.contains(node.as_str())))
        .map(str::to_owned)
        .collect();
    assert!(
        about_our_nodes.is_empty(),
        "a node with appendfsync always is fine, and the lenient client warned once: {about_our_nodes:?}"
    );
}

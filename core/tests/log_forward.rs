//! Forwarding the core's events to a front's logger (issue 21): the records
//! a front receives, their levels, the level switch, and no secret in any.
//! One test per binary: the forwarding subscriber is process-wide.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::*;
use fencelock::{Client, LockOptions, LogLevel, LogRecord};

fn drain(records: &mpsc::Receiver<LogRecord>) -> Vec<LogRecord> {
    // Delivery is asynchronous: let the queue empty before reading it.
    std::thread::sleep(Duration::from_millis(200));
    records.try_iter().collect()
}

fn field<'a>(record: &'a LogRecord, name: &str) -> Option<&'a str> {
    record
        .fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_receives_the_core_events_at_its_level_and_never_a_secret() {
    const PASSWORD: &str = "pw-SECRET-4711";
    let (send, records) = mpsc::channel();
    fencelock::forward_logs(
        Some(LogLevel::Trace),
        Box::new(move |record| {
            let _ = send.send(record);
        }),
    )
    .unwrap();
    assert_eq!(fencelock::log_level(), Some(LogLevel::Trace));

    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    for node in &nodes {
        node.command(&[
            "ACL",
            "SETUSER",
            "app",
            "on",
            &format!(">{PASSWORD}"),
            "~*",
            "+@all",
        ]);
    }
    nodes[2].kill();
    let client = Client::builder()
        .nodes(
            nodes
                .iter()
                .map(|n| n.url().replace("redis://", &format!("redis://app:{PASSWORD}@"))),
        )
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .unwrap();
    let lock = client
        .acquire("audit:2", LockOptions::new(ms(300)))
        .await
        .unwrap();
    let token = get(&nodes[0], &lock_key("audit:2")).unwrap();
    tokio::time::sleep(ms(250)).await; // a renewal or two
    nodes[0].command(&["DEL", &lock_key("audit:2")]);
    nodes[1].command(&["DEL", &lock_key("audit:2")]);
    tokio::time::timeout(ms(1000), lock.lost()).await.expect("loss");
    let _ = lock.release().await;

    let seen = drain(&records);
    let lines: Vec<String> = seen.iter().map(LogRecord::line).collect();
    let acquired = seen
        .iter()
        .find(|r| r.message == "lock acquired")
        .unwrap_or_else(|| panic!("no 'lock acquired' record: {lines:#?}"));
    assert_eq!(acquired.level, LogLevel::Debug);
    assert_eq!(field(acquired, "resource"), Some("audit:2"));
    assert!(acquired.target.starts_with("fencelock"), "{acquired:?}");
    let lost = seen
        .iter()
        .find(|r| r.message == "lock lost")
        .unwrap_or_else(|| panic!("no 'lock lost' record: {lines:#?}"));
    assert_eq!(lost.level, LogLevel::Warn);
    assert_eq!(field(lost, "resource"), Some("audit:2"));
    assert!(field(lost, "reason").is_some(), "{lost:?}");
    let unreachable = format!("127.0.0.1:{}", nodes[2].port());
    assert!(
        seen.iter()
            .any(|r| r.level == LogLevel::Warn && r.line().contains(&unreachable)),
        "the unreachable node is not named at warn: {lines:#?}"
    );
    assert!(
        seen.iter().any(|r| r.level == LogLevel::Trace),
        "no renewal at trace: {lines:#?}"
    );
    for line in &lines {
        assert!(!line.contains(PASSWORD), "a password reached a record: {line}");
        assert!(!line.contains(&token), "a lock token reached a record: {line}");
    }

    // At warn, an acquisition is not forwarded; a loss still is.
    fencelock::set_log_level(Some(LogLevel::Warn));
    let lock = client
        .acquire("audit:3", LockOptions::new(ms(300)))
        .await
        .unwrap();
    nodes[0].command(&["DEL", &lock_key("audit:3")]);
    nodes[1].command(&["DEL", &lock_key("audit:3")]);
    tokio::time::timeout(ms(1000), lock.lost()).await.expect("loss");
    let seen = drain(&records);
    assert!(
        seen.iter().all(|r| r.level <= LogLevel::Warn),
        "a record below warn was forwarded: {seen:#?}"
    );
    assert!(
        seen.iter().any(|r| r.message == "lock lost"),
        "the loss was not forwarded at warn: {seen:#?}"
    );

    // Off: nothing at all.
    fencelock::set_log_level(None);
    let lock = client
        .acquire("audit:4", LockOptions::new(ms(300)))
        .await
        .unwrap();
    nodes[0].command(&["DEL", &lock_key("audit:4")]);
    nodes[1].command(&["DEL", &lock_key("audit:4")]);
    tokio::time::timeout(ms(1000), lock.lost()).await.expect("loss");
    assert_eq!(drain(&records), Vec::new());

    // A sink that cannot keep up loses the overflow and is told how much;
    // the lock operations never wait for it (here it is stuck for the whole
    // burst, so waiting would hang the test).
    let (send, records) = mpsc::channel();
    let (open_gate, gate) = mpsc::channel::<()>();
    fencelock::forward_logs(
        Some(LogLevel::Debug),
        Box::new(move |record| {
            let _ = gate.recv();
            let _ = send.send(record);
        }),
    )
    .unwrap();
    let burst = async {
        for i in 0..700 {
            let lock = client
                .acquire(&format!("burst:{i}"), LockOptions::new(ms(1000)))
                .await
                .unwrap();
            lock.release().await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(120), burst)
        .await
        .expect("the lock operations waited for a stuck sink");
    drop(open_gate);
    let first: Vec<LogRecord> = (0..3)
        .map(|_| records.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    let notice = first
        .iter()
        .find(|r| r.message.contains("dropped"))
        .unwrap_or_else(|| panic!("no notice of dropped records: {first:#?}"));
    assert_eq!(notice.level, LogLevel::Warn);
    let dropped: u64 = field(notice, "dropped").unwrap().parse().unwrap();
    // 700 cycles log 1400 records at debug; the queue holds 1024 of them.
    assert!(dropped >= 300, "{dropped} records dropped, expected at least 300");
    fencelock::stop_forwarding_logs();
    assert_eq!(fencelock::log_level(), None);
}

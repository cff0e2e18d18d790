//! What fencelock logs: enough to see what happened, never a secret.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::*;
use fencelock::{Client, LockOptions};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_tell_the_story_without_passwords_or_tokens() {
    let captured = Captured::default();
    let sink = captured.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .init();

    const PASSWORD: &str = "pw-SECRET-4711";
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
    nodes[2].kill(); // logged as unreachable, with its URL
    let client = Client::builder()
        .nodes(
            nodes
                .iter()
                .map(|n| n.url().replace("redis://", &format!("redis://app:{PASSWORD}@"))),
        )
        // With node 3 dead, every call needs both others: a slow answer must
        // not fail them (try_acquire would say "unavailable", not "held").
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .unwrap();
    let lock = client
        .acquire("audit:1", LockOptions::new(ms(300)))
        .await
        .unwrap();
    let token = get(&nodes[0], &lock_key("audit:1")).unwrap();
    assert!(
        client
            .try_acquire("audit:1", LockOptions::new(ms(300)))
            .await
            .unwrap()
            .is_none()
    );
    lock.extend(ms(300)).await.unwrap();
    tokio::time::sleep(ms(250)).await; // a renewal or two
    nodes[0].command(&["DEL", &lock_key("audit:1")]);
    nodes[1].command(&["DEL", &lock_key("audit:1")]);
    tokio::time::timeout(ms(1000), lock.lost()).await.expect("loss");
    let _ = lock.release().await;
    let bad = Client::builder()
        .node(format!("redis://app:{PASSWORD}@127.0.0.1:0"))
        .build()
        .await;
    let shown = format!("{:?} {}", bad.as_ref().unwrap_err(), bad.as_ref().unwrap_err());

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    for expected in [
        "lock acquired",
        "audit:1",
        "renewing",
        "lock lost",
        "unreachable",
        "release",
    ] {
        assert!(
            logs.contains(expected),
            "the logs do not mention {expected:?}:\n{logs}"
        );
    }
    assert!(
        logs.contains(&format!("127.0.0.1:{}", nodes[2].port())),
        "the unreachable node is not named:\n{logs}"
    );
    assert!(!logs.contains(PASSWORD), "a password reached the logs:\n{logs}");
    assert!(!logs.contains(&token), "a lock token reached the logs:\n{logs}");
    assert!(!shown.contains(PASSWORD), "a password reached an error: {shown}");
}

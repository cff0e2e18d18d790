//! A transaction pooler nobody declared (issue 19; reliability.md P16):
//! through PgBouncer in transaction mode without `fencelock_pooler`, calls
//! reach server sessions that never prepared the script call. The client
//! finds out from the first such call, warns once, and sends every later
//! call as an unnamed statement; no call fails meanwhile. In a file of its
//! own: it installs the process's log sink.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::{Client, LockOptions, LogLevel, LogRecord};
use fencelock_harness::{PgBouncer, PostgresNode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undeclared_pooler_is_found_out_and_no_call_fails() {
    let node = PostgresNode::start();
    let direct = Client::builder().node(node.url()).build().await.unwrap();
    direct.migrate().await.unwrap();
    let Some(bouncer) = PgBouncer::start(&node) else {
        println!("SKIPPED: pgbouncer is not installed (apt-get install pgbouncer)");
        return;
    };
    let records: Arc<Mutex<Vec<LogRecord>>> = Arc::default();
    let sink = records.clone();
    fencelock::forward_logs(
        Some(LogLevel::Warn),
        Box::new(move |record| sink.lock().unwrap().push(record)),
    )
    .unwrap();

    // Three clients (a session each) and 24 tasks over a pool of 4 server
    // sessions: calls land on sessions that prepared nothing.
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(
            Client::builder()
                .node(bouncer.url())
                .node_timeout(Duration::from_secs(5))
                .build()
                .await
                .unwrap(),
        );
    }
    let tasks: Vec<_> = (0..24)
        .map(|task| {
            let client = clients[task % 3].clone();
            tokio::spawn(async move {
                for cycle in 0..10 {
                    let lock = client
                        .acquire(
                            &format!("pooled:{task}"),
                            LockOptions::new(Duration::from_secs(5)),
                        )
                        .await
                        .unwrap_or_else(|e| panic!("task {task}, cycle {cycle}: {e}"));
                    lock.release().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    fencelock::stop_forwarding_logs();
    let warnings: Vec<String> = records
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.message.contains("a prepared statement vanished"))
        .map(|r| r.line())
        .collect();
    assert!(
        !warnings.is_empty(),
        "no call met a session without the statement: the test did not test the fallback"
    );
    assert!(
        warnings.len() <= 3,
        "warned once per client at most: {warnings:?}"
    );
    assert!(
        warnings[0].contains("fencelock_pooler=transaction"),
        "{}",
        warnings[0]
    );
}

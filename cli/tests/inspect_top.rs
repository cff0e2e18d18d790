//! Issue 21: a live look at locks. `fencelock inspect` (alias `status`)
//! counts each node's waiters; `fencelock top` lists the prefix's locks,
//! busiest first, as plain frames or redrawn on a terminal (a pty here).

mod common;

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::pty::Terminal;
use common::{code, eventually, fencelock, finish, spawn, text};
use fencelock::{ClientBuilder, LockOptions, blocking};
use fencelock_harness::{NodeOptions, RedisNode};

fn client(nodes: &[RedisNode]) -> blocking::Client {
    blocking::Client::connect(
        ClientBuilder::default()
            .nodes(nodes.iter().map(RedisNode::url))
            .node_timeout(Duration::from_secs(5)),
    )
    .expect("connect")
}

fn options(seconds: u64) -> LockOptions {
    LockOptions::new(Duration::from_secs(seconds))
}

#[test]
fn inspect_counts_the_waiters_and_status_is_its_alias() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let node_refs: Vec<&RedisNode> = nodes.iter().collect();
    let lock = client(&nodes).acquire("report", options(30)).unwrap();
    let waiter = spawn(
        fencelock(&node_refs, &["run", "--wait", "30s", "report", "--", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let inspect = |command: &str| {
        let output = fencelock(&node_refs, &["--node-timeout", "5s", command, "report", "--json"])
            .output()
            .unwrap();
        assert_eq!(code(&output), 0, "{}", text(&output.stderr));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let waiting_everywhere = |report: &serde_json::Value| {
        report["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["waiters"] == 1)
    };
    assert!(
        eventually(Duration::from_secs(20), || waiting_everywhere(&inspect(
            "inspect"
        ))),
        "the waiting `fencelock run` was never counted: {}",
        inspect("inspect")
    );
    let alias = inspect("status");
    assert!(waiting_everywhere(&alias), "{alias}");
    assert_eq!(alias["held"], true);
    let table = fencelock(&node_refs, &["inspect", "report"]).output().unwrap();
    assert!(text(&table.stdout).contains("WAITERS"), "{}", text(&table.stdout));

    lock.release().unwrap();
    assert_eq!(code(&finish(waiter)), 0, "the waiter got the lock and ran");
    let report = inspect("inspect");
    assert!(
        report["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["waiters"] == 0),
        "{report}"
    );
}

/// Acquires and releases `resource` in a loop until dropped.
struct Churn {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Churn {
    fn start(nodes: &[RedisNode], resource: &'static str) -> Churn {
        let client = client(nodes);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                client.acquire(resource, options(5)).unwrap().release().unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Churn {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.take().unwrap().join();
    }
}

#[test]
fn top_prints_frames_with_the_busiest_lock_first() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let node_refs: Vec<&RedisNode> = nodes.iter().collect();
    let locks = client(&nodes);
    let held = locks.acquire("jobs:held", options(30)).unwrap();
    locks
        .acquire("mail:other", options(30))
        .unwrap()
        .release()
        .unwrap();
    let _churn = Churn::start(&nodes, "jobs:busy");
    let output = fencelock(
        &node_refs,
        &[
            "top",
            "--match",
            "jobs:*",
            "--interval",
            "500ms",
            "--iterations",
            "3",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(code(&output), 0, "{}", text(&output.stderr));
    let shown = text(&output.stdout);
    let frames: Vec<&str> = shown.split("fencelock top:").skip(1).collect();
    assert_eq!(frames.len(), 3, "{shown}");
    assert!(
        !shown.contains("mail:other"),
        "a lock outside --match was shown:\n{shown}"
    );
    assert!(!shown.contains('\x1b'), "escape codes in plain frames:\n{shown}");
    for frame in &frames[1..] {
        let rows: Vec<&str> = frame
            .lines()
            .skip_while(|l| !l.starts_with("RESOURCE"))
            .skip(1)
            .collect();
        assert!(
            rows[0].starts_with("jobs:busy"),
            "the busy lock is not first:\n{frame}"
        );
        let rate: f64 = rows[0].split_whitespace().nth(5).unwrap().parse().unwrap();
        assert!(rate > 0.0, "no grants per second for the busy lock:\n{frame}");
        let held_row = rows
            .iter()
            .find(|r| r.starts_with("jobs:held"))
            .expect("the held lock");
        assert!(held_row.contains("yes 1/1"), "{held_row}");
    }
    held.release().unwrap();

    // Named locks need no listing (a Redis Cluster node cannot list).
    let named = fencelock(&node_refs, &["top", "-n", "1", "mail:other"])
        .output()
        .unwrap();
    assert!(
        text(&named.stdout).contains("mail:other"),
        "{}",
        text(&named.stdout)
    );
    let bad = fencelock(&node_refs, &["top", "--interval", "10ms"])
        .output()
        .unwrap();
    assert_eq!(code(&bad), 2);
    assert!(text(&bad.stderr).contains("100ms"), "{}", text(&bad.stderr));
}

#[test]
fn top_redraws_on_a_terminal_and_q_gives_the_terminal_back() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let locks = client(&nodes);
    let held = locks.acquire("pty:held", options(30)).unwrap();
    let waiting = std::thread::spawn({
        let locks = client(&nodes);
        move || locks.acquire("pty:held", options(30).wait(Duration::from_secs(60)))
    });
    let mut terminal = Terminal::shell(&[("FENCELOCK_NODES", &nodes[0].url())]);
    terminal.type_line(&format!(
        "{} top --interval 200ms --match 'pty:*'",
        env!("CARGO_BIN_EXE_fencelock")
    ));
    terminal.expect("\x1b[?1049h"); // the alternate screen
    terminal.expect("pty:held");
    // Redrawn: the header again, with the waiter counted by then.
    assert!(
        eventually(Duration::from_secs(20), || {
            let screen = terminal.screen();
            let last = screen.rsplit("fencelock top:").next().unwrap_or("").to_owned();
            last.lines()
                .any(|l| l.starts_with("pty:held") && l.split_whitespace().nth(4) == Some("1"))
        }),
        "the waiter never showed:\n{}",
        terminal.screen()
    );
    terminal.send(b"q");
    terminal.expect("\x1b[?1049l"); // the screen given back
    assert_eq!(terminal.last_status(), 0);
    held.release().unwrap();
    waiting.join().unwrap().unwrap().release().unwrap();
}

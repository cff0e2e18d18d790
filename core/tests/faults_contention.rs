//! T01 (reliability.md §3): mutual exclusion on one node under real
//! contention from two processes, and the control run without the lock that
//! must lose updates, which proves the counter and overlap checks can see a
//! race when there is one.
//!
//! Each process is this test binary re-run as a worker (`t01_worker_entry`):
//! it runs threads that increment a shared counter by GET, short sleep, SET,
//! and prints one line per critical section with its times on the
//! system-wide monotonic clock, so the parent can merge both processes into
//! one `History`.

mod faults_support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use faults_support::clock::{MonotonicClock, monotonic_nanos};
use faults_support::*;
use fencelock::{LockOptions, RetryPolicy, blocking};
use rand::Rng;

const PROCESSES: usize = 2;
const THREADS: usize = 4;
const COUNTER: &str = "data:t01:counter";
const RESOURCE: &str = "t01:counter";
const TTL: Duration = Duration::from_secs(2);
/// Worker output lines start with this; libtest's own lines are skipped.
const LINE: &str = "T01 ";

#[test]
#[ignore = "a T01 worker process of other tests, not a test"]
fn t01_worker_entry() {
    let Ok(mode) = std::env::var("FENCELOCK_T01_MODE") else {
        eprintln!("t01_worker_entry is a worker process of t01_*; nothing to do on its own");
        return;
    };
    let env = |key: &str| std::env::var(key).unwrap_or_else(|_| panic!("{key} not set"));
    let url = env("FENCELOCK_T01_NODE");
    let rounds: usize = env("FENCELOCK_T01_ROUNDS").parse().unwrap();
    let label = env("FENCELOCK_T01_LABEL");
    run_worker_process(&url, &label, rounds, mode == "locked");
}

/// T01: 2 processes × 4 threads increment one counter under the lock. The
/// counter is exact (P2), no two critical sections overlap (P1, checked on
/// the merged history), tokens rise in grant order (P9), and each process's
/// occupancy counter never exceeds 1.
#[test]
fn t01_two_processes_keep_the_counter_exact_under_the_lock() {
    let rounds = scale("t01", 250, 1250);
    let node = RedisNode::start(&NodeOptions::default());
    let started = Instant::now();
    let run = run_workers(&node, rounds, true);
    eprintln!("t01: {} grants in {:?}", run.history.len(), started.elapsed());
    let expected = (PROCESSES * THREADS * rounds) as u64;
    assert_eq!(run.max_occupancy, 1, "two threads of one process inside at once");
    assert_eq!(run.history.len() as u64, expected, "every round is a grant");
    let mut violations = run.history.check(&CheckOptions::default());
    violations.extend(check_counter(expected, run.counter));
    assert_no_violations(&violations);
}

/// T01 control: the same workload without the lock must lose updates and
/// show overlapping critical sections; otherwise the exact counter above
/// would prove nothing.
#[test]
fn t01_control_without_the_lock_loses_updates() {
    let rounds = scale("t01_control", 250, 1250);
    let node = RedisNode::start(&NodeOptions::default());
    let run = run_workers(&node, rounds, false);
    let expected = (PROCESSES * THREADS * rounds) as u64;
    eprintln!("t01_control: counter {}/{expected}", run.counter);
    assert!(
        check_counter(expected, run.counter).is_some(),
        "the unlocked control lost no update: the workload has no real contention"
    );
    assert!(
        !run.history.overlaps().is_empty(),
        "the overlap checker saw no overlap in the unlocked control"
    );
    assert!(run.max_occupancy > 1, "threads never met inside the section");
}

/// What the parent learns from one run of both worker processes.
struct WorkersRun {
    history: History,
    counter: u64,
    max_occupancy: usize,
}

/// Starts the worker processes, waits for them, merges their reports.
fn run_workers(node: &RedisNode, rounds: usize, locked: bool) -> WorkersRun {
    let exe = std::env::current_exe().expect("test binary path");
    let children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            Command::new(&exe)
                .args([
                    "t01_worker_entry",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("FENCELOCK_T01_MODE", if locked { "locked" } else { "unlocked" })
                .env("FENCELOCK_T01_NODE", node.url())
                .env("FENCELOCK_T01_ROUNDS", rounds.to_string())
                .env("FENCELOCK_T01_LABEL", format!("process {p}"))
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start a T01 worker")
        })
        .collect();
    // Drained in parallel, so a full pipe never stalls one worker.
    let readers: Vec<_> = children
        .into_iter()
        .map(|mut child| {
            std::thread::spawn(move || {
                let stdout = BufReader::new(child.stdout.take().unwrap());
                let lines: Vec<String> = stdout.lines().map_while(std::io::Result::ok).collect();
                assert!(child.wait().unwrap().success(), "a T01 worker failed");
                lines
            })
        })
        .collect();
    let clock = MonotonicClock::now();
    let history = History::new();
    let mut max_occupancy = 0;
    for reader in readers {
        for line in reader.join().expect("worker reader") {
            let Some(at) = line.find(LINE) else { continue };
            let fields: Vec<&str> = line[at + LINE.len()..].split_whitespace().collect();
            match fields.as_slice() {
                ["occupancy", n] => max_occupancy = max_occupancy.max(n.parse().unwrap()),
                ["grant", ..] => record_grant_line(&history, &clock, &fields[1..]),
                _ => panic!("unexpected worker line: {line}"),
            }
        }
    }
    let counter = match node.command(&["GET", COUNTER]) {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes).unwrap().parse().unwrap(),
        other => panic!("counter missing: {other:?}"),
    };
    WorkersRun {
        history,
        counter,
        max_occupancy,
    }
}

/// `<client> <requested ns> <acquired ns> <validity µs> <released ns> <token>`.
fn record_grant_line(history: &History, clock: &MonotonicClock, fields: &[&str]) {
    let n = |i: usize| -> u64 { fields[i].parse().unwrap() };
    let grant = Grant::new(
        fields[0],
        RESOURCE,
        clock.instant(n(1)),
        clock.instant(n(2)),
        Duration::from_micros(n(3)),
        TTL,
        n(5),
    );
    let id = history.record(grant);
    history.released(id, clock.instant(n(4)));
}

/// The worker process: `THREADS` threads, each with its own blocking client.
fn run_worker_process(url: &str, label: &str, rounds: usize, locked: bool) {
    let occupancy = AtomicUsize::new(0);
    let max_occupancy = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (occupancy, max_occupancy) = (&occupancy, &max_occupancy);
            let who = format!("{label} thread {thread}");
            scope.spawn(move || {
                let client = blocking::Client::connect(
                    builder_for([url.to_owned()]).retry(RetryPolicy::new(ms(1), ms(10))),
                )
                .expect("worker client");
                let mut store = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..rounds {
                    let section = Section {
                        occupancy,
                        max_occupancy,
                    };
                    if locked {
                        locked_increment(&client, &mut store, &who, &section);
                    } else {
                        unlocked_increment(&mut store, &who, &section);
                    }
                }
            });
        }
    });
    println!("{LINE}occupancy {}", max_occupancy.load(Ordering::SeqCst));
}

/// The in-process occupancy count of the critical section.
struct Section<'a> {
    occupancy: &'a AtomicUsize,
    max_occupancy: &'a AtomicUsize,
}

impl Section<'_> {
    fn enter(&self) {
        let inside = self.occupancy.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_occupancy.fetch_max(inside, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.occupancy.fetch_sub(1, Ordering::SeqCst);
    }
}

fn locked_increment(client: &blocking::Client, store: &mut redis::Connection, who: &str, section: &Section) {
    let requested = monotonic_nanos();
    let lock = client
        .acquire(RESOURCE, LockOptions::new(TTL).wait(ms(30_000)))
        .expect("acquire under contention");
    let acquired = monotonic_nanos();
    let validity = lock.remaining();
    section.enter();
    read_sleep_write(store);
    section.leave();
    // Released once we stop relying on it: before the release call returns.
    let released = monotonic_nanos();
    lock.release().expect("release");
    println!(
        "{LINE}grant {} {requested} {acquired} {} {released} {}",
        who.replace(' ', "_"),
        validity.as_micros(),
        lock.fencing_token()
    );
}

/// The control: the same section with no lock, recorded as if it were a
/// grant (token 0; only P1 and P2 are read for it).
fn unlocked_increment(store: &mut redis::Connection, who: &str, section: &Section) {
    let entered = monotonic_nanos();
    section.enter();
    read_sleep_write(store);
    section.leave();
    let left = monotonic_nanos();
    println!(
        "{LINE}grant {} {entered} {entered} {} {left} 0",
        who.replace(' ', "_"),
        TTL.as_micros()
    );
}

/// The non-atomic read-modify-write with a 0–1 ms gap, as in the plan.
fn read_sleep_write(store: &mut redis::Connection) {
    let value: Option<u64> = redis::cmd("GET").arg(COUNTER).query(store).unwrap();
    std::thread::sleep(Duration::from_micros(rand::rng().random_range(0..=1000)));
    let _: () = redis::cmd("SET")
        .arg(COUNTER)
        .arg(value.unwrap_or(0) + 1)
        .query(store)
        .unwrap();
}

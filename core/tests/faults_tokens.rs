//! T16 and T26 (reliability.md §3): fencing tokens that rise across
//! processes while nodes restart, and lock tokens that cannot be guessed.
//!
//! T16: 8 worker processes (this test binary re-run as `t16_worker_entry`)
//! contend for one resource on 5 nodes and report every grant on
//! `CLOCK_MONOTONIC`, so one history holds them all. During the run the
//! parent kills an AOF node and restarts it, and kills the node without
//! persistence and keeps it down for longer than the ttl before it restarts
//! empty. The merged history must keep holders apart (P1) and its tokens
//! strictly increasing in grant order (P9), without a duplicate.
//!
//! T26: the lock token generator is crate-private, so tokens are observed
//! the way an attacker with read access to Redis would see them: the value
//! of the lock key after an acquisition.
//!
//! - 10^5 tokens in-process (10^6 with `FENCELOCK_LONG=1`): no duplicate,
//!   128 bits, every bit set with frequency 0.5 within a bound;
//! - consecutive tokens share no structure (a time or pid field would show
//!   as a low Hamming distance between neighbours);
//! - forked children (real `fork(2)` after the parent has drawn tokens, in
//!   worker processes re-run from this binary) draw tokens disjoint from the
//!   parent's and from each other;
//! - `Debug` of a lock redacts its token (a `Lock` has no `Display`).

mod faults_support;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use faults_support::*;
use fencelock::{Client, LockOptions, TOKEN_BYTES};

/// Acquisitions between two `FLUSHALL`s: bounds the node's memory.
const BATCH: usize = 20_000;
/// Acquire tasks running at once.
const CONCURRENCY: usize = 16;
const WORKERS: usize = 2;
/// `fork(2)` children per worker process.
const FORKS: usize = 2;
/// Tokens drawn by each process of the fork test (the plan's 10^4).
const FORK_TOKENS: usize = 10_000;
const LINE: &str = "T26 ";

#[test]
#[ignore = "a T26 worker process of other tests, not a test"]
fn t26_worker_entry() {
    let Ok(url) = std::env::var("FENCELOCK_T26_NODE") else {
        eprintln!("t26_worker_entry is a worker process of t26_*; nothing to do on its own");
        return;
    };
    let count: usize = std::env::var("FENCELOCK_T26_COUNT").unwrap().parse().unwrap();
    let label = std::env::var("FENCELOCK_T26_LABEL").unwrap();
    run_forking_worker(&url, &label, count);
}

/// T26: 10^5 (10^6 long) tokens, unique, full length, unbiased bits, no
/// structure between neighbours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t26_tokens_are_unique_and_unbiased() {
    let count = scale("t26", 100_000, 1_000_000);
    let node = RedisNode::start(&NodeOptions::default());
    let client = builder_for([node.url()]).build().await.unwrap();
    let started = Instant::now();
    let tokens = draw_tokens(&client, &node, "t26:self", count).await;
    eprintln!("t26: {} tokens in {:?}", tokens.len(), started.elapsed());
    const { assert!(TOKEN_BYTES >= 16, "tokens shorter than 128 bits") };
    assert!(
        tokens.iter().all(|t| t.len() == 2 * TOKEN_BYTES),
        "a token is not {TOKEN_BYTES} hex-encoded bytes"
    );
    let values: Vec<u128> = tokens.iter().map(|t| parse_token(t)).collect();
    let unique: HashSet<u128> = values.iter().copied().collect();
    assert_eq!(unique.len(), values.len(), "duplicate tokens");
    assert_bits_unbiased(&values);
    assert_neighbours_unrelated(&values);
}

/// T26: tokens of forked children are disjoint from the parent's and from
/// each other's. Two worker processes each draw tokens, then fork two
/// children that draw more after the fork: the plan's 10^4 tokens in each
/// of the 4 forked children, in CI as in the long variant (it costs about
/// 3 s more than 5,000 did).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t26_forked_children_draw_disjoint_tokens() {
    let per_process = FORK_TOKENS;
    eprintln!("t26_fork: {per_process} tokens per process, in CI and long alike");
    let started = Instant::now();
    let node = RedisNode::start(&NodeOptions::default());
    let client = builder_for([node.url()]).build().await.unwrap();
    let own = draw_tokens(&client, &node, "t26:parent", per_process).await;
    let mut drawn = own.len();
    let mut sets = vec![("test process".to_owned(), token_set(&own))];
    for worker in 0..WORKERS {
        let (worker_sets, lines) = run_worker(&node, worker, per_process);
        sets.extend(worker_sets);
        drawn += lines;
    }
    assert_eq!(sets.len(), 1 + WORKERS * (1 + FORKS), "a process did not report");
    let mut shared_pairs = 0;
    for (i, (name, set)) in sets.iter().enumerate() {
        for (other, other_set) in &sets[i + 1..] {
            let shared = set.intersection(other_set).count();
            if shared > 0 {
                shared_pairs += 1;
                eprintln!("t26_fork: {name} and {other} share {shared} tokens");
            }
        }
    }
    let forked = sets.iter().filter(|(name, _)| name.contains("/fork")).count();
    let distinct: HashSet<u128> = sets.iter().flat_map(|(_, set)| set.iter().copied()).collect();
    eprintln!(
        "t26_fork: {} processes ({forked} forked children), distinct tokens per process {:?}, \
         {} distinct of {} drawn, {shared_pairs} pairs sharing a token, in {:?}",
        sets.len(),
        sets.iter().map(|(_, set)| set.len()).collect::<Vec<_>>(),
        distinct.len(),
        drawn,
        started.elapsed()
    );
    assert_eq!(forked, WORKERS * FORKS, "a forked child did not report");
    for (name, set) in &sets {
        assert_eq!(set.len(), per_process, "{name}: duplicate or missing tokens");
    }
    assert_eq!(shared_pairs, 0, "processes share tokens");
    assert_eq!(distinct.len(), drawn, "duplicate tokens");
}

/// T26: the token is redacted from a lock's `Debug`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t26_debug_of_a_lock_redacts_the_token() {
    let node = RedisNode::start(&NodeOptions::default());
    let client = builder_for([node.url()]).build().await.unwrap();
    let lock = client
        .acquire("t26:debug", LockOptions::new(ms(2000)))
        .await
        .unwrap();
    let token = get(&node, &lock_key("t26:debug")).expect("lock key");
    let debug = format!("{lock:?} {lock:#?}");
    assert!(!debug.contains(&token), "Debug shows the token: {debug}");
    assert!(
        debug.contains("redacted"),
        "Debug does not say the token is redacted: {debug}"
    );
    lock.release().await.unwrap();
}

/// Acquires `count` distinct resources (no renewal), reads every lock key's
/// value, and flushes the node after each batch.
async fn draw_tokens(client: &Client, node: &RedisNode, prefix: &str, count: usize) -> Vec<String> {
    let mut tokens = Vec::with_capacity(count);
    for start in (0..count).step_by(BATCH) {
        let resources: Vec<String> = (start..count.min(start + BATCH))
            .map(|i| format!("{prefix}:{i}"))
            .collect();
        acquire_all(client, &resources).await;
        tokens.extend(read_tokens(node, &resources));
        node.command(&["FLUSHALL"]);
    }
    tokens
}

async fn acquire_all(client: &Client, resources: &[String]) {
    let chunk = resources.len().div_ceil(CONCURRENCY);
    let mut tasks = tokio::task::JoinSet::new();
    for part in resources.chunks(chunk) {
        let (client, part) = (client.clone(), part.to_vec());
        tasks.spawn(async move {
            for resource in part {
                // No renewal, long ttl: the key stays until the flush.
                let options = LockOptions::new(Duration::from_secs(60)).auto_renew(false);
                let lock = client.acquire(&resource, options).await.expect("acquire");
                drop(lock);
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("acquire task");
    }
}

fn read_tokens(node: &RedisNode, resources: &[String]) -> Vec<String> {
    let keys: Vec<String> = resources.iter().map(|r| lock_key(r)).collect();
    let mut connection = node.connection();
    keys.chunks(1000)
        .flat_map(|chunk| {
            let values: Vec<Option<String>> = redis::cmd("MGET")
                .arg(chunk)
                .query(&mut connection)
                .expect("MGET");
            values
        })
        .map(|value| value.expect("a lock key vanished before it was read"))
        .collect()
}

fn parse_token(token: &str) -> u128 {
    u128::from_str_radix(token, 16).unwrap_or_else(|_| panic!("token is not hex: {token}"))
}

fn token_set(tokens: &[String]) -> HashSet<u128> {
    tokens.iter().map(|t| parse_token(t)).collect()
}

/// Each bit is set in half the tokens, within six standard deviations
/// (0.0095 at 10^5) or the plan's 0.005, whichever is wider: tight enough to
/// catch a stuck or biased bit, loose enough never to flake over 128 bits.
fn assert_bits_unbiased(values: &[u128]) {
    let n = values.len() as f64;
    let bound = (3.0 / n.sqrt()).max(0.005);
    let mut worst = (0, 0.0_f64);
    for bit in 0..128 {
        let ones = values.iter().filter(|v| (*v >> bit) & 1 == 1).count();
        let bias = (ones as f64 / n - 0.5).abs();
        if bias > worst.1 {
            worst = (bit, bias);
        }
    }
    eprintln!(
        "t26: worst bit {} off 0.5 by {:.5} (bound {bound:.5})",
        worst.0, worst.1
    );
    assert!(
        worst.1 <= bound,
        "bit {} is biased by {:.5} > {bound:.5}",
        worst.0,
        worst.1
    );
}

/// Tokens drawn back to back differ in about 64 of 128 bits; an embedded
/// time or pid would pull the mean down.
fn assert_neighbours_unrelated(values: &[u128]) {
    let pairs = values.windows(2).take(1000);
    let distances: Vec<u32> = pairs.map(|w| (w[0] ^ w[1]).count_ones()).collect();
    let mean = f64::from(distances.iter().sum::<u32>()) / distances.len() as f64;
    eprintln!("t26: mean Hamming distance between neighbours {mean:.2} of 128");
    assert!(
        (60.0..=68.0).contains(&mean),
        "neighbouring tokens are related: {mean:.2}"
    );
}

/// Runs one worker process; returns its pre-fork set and each child's set.
/// Also returns how many tokens it reported in all.
fn run_worker(node: &RedisNode, worker: usize, count: usize) -> (Vec<(String, HashSet<u128>)>, usize) {
    let output = Command::new(std::env::current_exe().expect("test binary path"))
        .args([
            "t26_worker_entry",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FENCELOCK_T26_NODE", node.url())
        .env("FENCELOCK_T26_COUNT", count.to_string())
        .env("FENCELOCK_T26_LABEL", format!("worker{worker}"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run a T26 worker");
    assert!(output.status.success(), "T26 worker {worker} failed");
    let mut sets: Vec<(String, HashSet<u128>)> = Vec::new();
    let mut lines = 0;
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some(at) = line.find(LINE) else { continue };
        let (name, token) = line[at + LINE.len()..].split_once(' ').expect("name and token");
        lines += 1;
        match sets.iter_mut().find(|(n, _)| n == name) {
            Some((_, set)) => {
                set.insert(parse_token(token));
            }
            None => sets.push((name.to_owned(), HashSet::from([parse_token(token)]))),
        }
    }
    (sets, lines)
}

/// The worker: draws `count` tokens, then forks children that draw `count`
/// more each. The parent's runtime is gone before the fork (no threads to
/// lose), but everything it initialised in user space (allocator, any RNG
/// state) is copied into the children: the case the plan asks about.
fn run_forking_worker(url: &str, label: &str, count: usize) {
    draw_and_print(url, label, count);
    let mut children = Vec::new();
    for fork in 0..FORKS {
        // SAFETY: the process is single-threaded here (the runtime was shut
        // down); the child only builds a new runtime, prints and `_exit`s.
        match unsafe { libc::fork() } {
            0 => {
                draw_and_print(url, &format!("{label}/fork{fork}"), count);
                // SAFETY: leave without running the parent's exit handlers twice.
                unsafe { libc::_exit(0) }
            }
            -1 => panic!("fork failed"),
            pid => children.push(pid),
        }
    }
    for pid in children {
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "a forked child failed"
        );
    }
}

/// Draws on a fresh current-thread runtime and prints `T26 <label> <token>`.
fn draw_and_print(url: &str, label: &str, count: usize) {
    use std::io::Write;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tokens = runtime.block_on(async {
        let client = builder_for([url.to_owned()])
            .build()
            .await
            .expect("worker client");
        // Each process its own resource names, so no acquire waits on another.
        let prefix = format!("t26:{label}:{}", std::process::id());
        let tokens = draw_on(&client, url, &prefix, count).await;
        client.close();
        tokens
    });
    drop(runtime);
    let mut out = std::io::stdout().lock();
    for token in tokens {
        writeln!(out, "{LINE}{label} {token}").unwrap();
    }
    out.flush().unwrap();
}

/// `draw_tokens` without flushing: processes share the node, so each reads
/// and deletes only its own keys.
async fn draw_on(client: &Client, url: &str, prefix: &str, count: usize) -> Vec<String> {
    let resources: Vec<String> = (0..count).map(|i| format!("{prefix}:{i}")).collect();
    acquire_all(client, &resources).await;
    let keys: Vec<String> = resources.iter().map(|r| lock_key(r)).collect();
    let mut connection = redis::Client::open(url).unwrap().get_connection().unwrap();
    let mut tokens = Vec::with_capacity(count);
    for chunk in keys.chunks(1000) {
        let values: Vec<Option<String>> = redis::cmd("MGET").arg(chunk).query(&mut connection).unwrap();
        tokens.extend(values.into_iter().map(|v| v.expect("lock key")));
        let _: () = redis::cmd("DEL").arg(chunk).query(&mut connection).unwrap();
    }
    tokens
}

// ---------------------------------------------------------------- T16

const T16_PROCESSES: usize = 8;
const T16_RESOURCE: &str = "t16:seq";
const T16_TTL: Duration = Duration::from_secs(1);
/// Worker output lines start with this; libtest's own lines are skipped.
const T16_LINE: &str = "T16 ";
/// The AOF node that is killed and restarted at once, and the node without
/// persistence that is kept down for longer than the ttl.
const T16_AOF_NODE: usize = 0;
const T16_EMPTY_NODE: usize = 4;

#[test]
#[ignore = "a T16 worker process of other tests, not a test"]
fn t16_worker_entry() {
    let Ok(nodes) = std::env::var("FENCELOCK_T16_NODES") else {
        eprintln!("t16_worker_entry is a worker process of t16_*; nothing to do on its own");
        return;
    };
    let urls: Vec<String> = nodes.split(',').map(str::to_owned).collect();
    let label = std::env::var("FENCELOCK_T16_LABEL").unwrap();
    run_grant_worker(&urls, &label);
}

/// T16: 8 processes contend for one resource on 5 nodes (4 with AOF
/// `appendfsync always`, 1 without persistence) until the run has its grants
/// (1,000 in CI, 10,000 long). During the run the parent kills the AOF node
/// A and restarts it once grants went on without it, then kills node B (no
/// persistence), keeps it down for longer than the ttl and restarts it
/// empty: its lock keys and its fencing counter are gone. Every grant of
/// every process lands in one history: no two holders at once (P1), valid
/// validities (P3), tokens strictly increasing in grant order (P9), no
/// duplicate token, and a majority of counters at or above the last token.
#[test]
fn t16_eight_processes_get_rising_tokens_while_nodes_restart() {
    let target = scale("t16", 1_000, 10_000);
    let aof = NodeOptions {
        aof: true,
        ..NodeOptions::default()
    };
    let mut nodes = RedisNode::start_many(4, &aof);
    nodes.push(RedisNode::start(&NodeOptions::default()));
    let urls: Vec<String> = nodes.iter().map(RedisNode::url).collect();
    let started = Instant::now();
    let run = run_grant_workers(&nodes, &urls, target);
    let elapsed = started.elapsed();
    let history = &run.history;
    let grants = history.grants();

    let mut tokens: Vec<u64> = grants.iter().map(|g| g.fencing_token).collect();
    tokens.sort_unstable();
    let before_dedup = tokens.len();
    tokens.dedup();
    let duplicates = before_dedup - tokens.len();
    let violations = history.check(&CheckOptions::default());
    let count = |kind: fn(&Violation) -> bool| violations.iter().filter(|v| kind(v)).count();
    let overlaps = count(|v| matches!(v, Violation::Overlap { .. }));
    let inversions = count(|v| matches!(v, Violation::TokenOrder { .. }));
    let bad_validities = count(|v| matches!(v, Violation::Validity { .. }));
    let last_token = tokens.last().copied().unwrap_or(0);
    let counters: Vec<u64> = nodes
        .iter()
        .map(|node| fence_counter(node, T16_RESOURCE))
        .collect();
    let at_or_above = counters.iter().filter(|&&c| c >= last_token).count();
    eprintln!(
        "t16: {} grants by {T16_PROCESSES} processes in {elapsed:?} (per process {:?}); \
         A (AOF) down for {} grants; B (no persistence) down {:?} (ttl {T16_TTL:?}) for {} grants, \
         then {} grants after its empty restart; release failures {}",
        grants.len(),
        run.per_process,
        run.grants_while_aof_down,
        run.empty_down_for,
        run.grants_while_empty_down,
        run.grants_after_empty_restart,
        run.release_failures,
    );
    eprintln!(
        "t16: tokens {}..={last_token}, duplicates {duplicates}, P1 overlaps {overlaps}, \
         P9 inversions {inversions}, P3 {bad_validities}; counters {counters:?}, \
         {at_or_above} of 5 at or above the last token",
        tokens.first().copied().unwrap_or(0),
    );

    let reported: u64 = run.per_process.iter().sum();
    assert_eq!(run.per_process.len(), T16_PROCESSES, "a worker did not report");
    assert_eq!(
        reported,
        grants.len() as u64,
        "grant lines and worker totals differ"
    );
    assert!(
        grants.len() >= target,
        "{} grants, fewer than {target}",
        grants.len()
    );
    assert!(
        run.empty_down_for > T16_TTL,
        "B was not kept down longer than the ttl"
    );
    assert_eq!(duplicates, 0, "duplicate fencing tokens");
    assert_no_violations(&violations);
    assert!(
        at_or_above >= 3,
        "the last token {last_token} is above the counters of a majority: {counters:?}"
    );
}

/// What the parent learns from one T16 run.
struct GrantRun {
    history: History,
    /// Grants each worker counted, from its final line.
    per_process: Vec<u64>,
    release_failures: u64,
    grants_while_aof_down: usize,
    empty_down_for: Duration,
    grants_while_empty_down: usize,
    grants_after_empty_restart: usize,
}

/// Where the parent is in its fault schedule.
enum Schedule {
    /// Waiting for a fifth of the grants before killing A.
    Start,
    /// A is down since this many grants.
    AofDown {
        since: usize,
    },
    AofBack,
    /// B is down since this instant and this many grants.
    EmptyDown {
        at: Instant,
        since: usize,
    },
    /// B is back (empty) since this many grants.
    EmptyBack {
        since: usize,
    },
    /// The workers were told to stop.
    Stopping {
        empty_back_since: usize,
    },
}

/// Starts the workers, runs the fault schedule while their grants come in,
/// stops them once the run has its grants, and merges their reports.
fn run_grant_workers(nodes: &[RedisNode], urls: &[String], target: usize) -> GrantRun {
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;

    let exe = std::env::current_exe().expect("test binary path");
    let mut children: Vec<_> = (0..T16_PROCESSES)
        .map(|p| {
            Command::new(&exe)
                .args([
                    "t16_worker_entry",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("FENCELOCK_T16_NODES", urls.join(","))
                .env("FENCELOCK_T16_LABEL", format!("process_{p}"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start a T16 worker")
        })
        .collect();
    // A worker stops when its stdin closes.
    let mut stdins: Vec<_> = children.iter_mut().map(|c| c.stdin.take().unwrap()).collect();
    let (tx, lines) = mpsc::channel::<(usize, String)>();
    let readers: Vec<_> = children
        .iter_mut()
        .enumerate()
        .map(|(p, child)| {
            let (stdout, tx) = (child.stdout.take().unwrap(), tx.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(std::io::Result::ok) {
                    if let Some(at) = line.find(T16_LINE) {
                        let _ = tx.send((p, line[at + T16_LINE.len()..].to_owned()));
                    }
                }
            })
        })
        .collect();
    drop(tx);

    let clock = faults_support::clock::MonotonicClock::now();
    let history = History::new();
    let mut per_process = Vec::new();
    let mut release_failures = 0;
    let mut run = GrantRun {
        history: history.clone(),
        per_process: Vec::new(),
        release_failures: 0,
        grants_while_aof_down: 0,
        empty_down_for: Duration::ZERO,
        grants_while_empty_down: 0,
        grants_after_empty_restart: 0,
    };
    let limit = if long_run() {
        Duration::from_secs(900)
    } else {
        Duration::from_secs(180)
    };
    let deadline = Instant::now() + limit;
    let mut schedule = Schedule::Start;
    loop {
        match lines.recv_timeout(Duration::from_millis(20)) {
            Ok((p, line)) => {
                let fields: Vec<&str> = line.split_whitespace().collect();
                match fields.as_slice() {
                    ["grant", ..] => record_t16_grant(&history, &clock, p, &fields[1..]),
                    ["done", grants, failures] => {
                        per_process.push(grants.parse::<u64>().unwrap());
                        release_failures += failures.parse::<u64>().unwrap();
                    }
                    _ => panic!("unexpected T16 worker line: {line}"),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        assert!(
            Instant::now() < deadline,
            "T16 did not finish within {limit:?}: {} grants",
            history.len()
        );
        let grants = history.len();
        schedule = match schedule {
            Schedule::Start if grants >= target / 5 => {
                nodes[T16_AOF_NODE].kill();
                Schedule::AofDown { since: grants }
            }
            Schedule::AofDown { since } if grants >= since + target / 20 => {
                nodes[T16_AOF_NODE].restart();
                run.grants_while_aof_down = grants - since;
                Schedule::AofBack
            }
            Schedule::AofBack if grants >= 2 * target / 5 => {
                nodes[T16_EMPTY_NODE].kill();
                Schedule::EmptyDown {
                    at: Instant::now(),
                    since: grants,
                }
            }
            Schedule::EmptyDown { at, since }
                if at.elapsed() > T16_TTL + Duration::from_millis(250) && grants >= since + target / 20 =>
            {
                // `restart` finds the process gone and starts it again: an
                // empty node, as after a crash without persistence.
                nodes[T16_EMPTY_NODE].restart();
                run.empty_down_for = at.elapsed();
                run.grants_while_empty_down = grants - since;
                Schedule::EmptyBack { since: grants }
            }
            Schedule::EmptyBack { since } if grants >= target && grants >= since + target / 5 => {
                stdins.clear();
                Schedule::Stopping {
                    empty_back_since: since,
                }
            }
            unchanged => unchanged,
        };
    }
    for reader in readers {
        reader.join().expect("T16 worker reader");
    }
    for (p, mut child) in children.into_iter().enumerate() {
        assert!(child.wait().unwrap().success(), "T16 worker {p} failed");
    }
    let Schedule::Stopping { empty_back_since } = schedule else {
        panic!("the workers ended before the parent stopped them");
    };
    // Grants that came in after the stop was sent count too.
    run.grants_after_empty_restart = history.len() - empty_back_since;
    run.per_process = per_process;
    run.release_failures = release_failures;
    run
}

/// `<requested ns> <acquired ns> <validity µs> <released ns> <token>`.
fn record_t16_grant(
    history: &History,
    clock: &faults_support::clock::MonotonicClock,
    process: usize,
    fields: &[&str],
) {
    let n = |i: usize| -> u64 { fields[i].parse().unwrap() };
    let grant = Grant::new(
        format!("process {process}"),
        T16_RESOURCE,
        clock.instant(n(0)),
        clock.instant(n(1)),
        Duration::from_micros(n(2)),
        T16_TTL,
        n(4),
    );
    let id = history.record(grant);
    history.released(id, clock.instant(n(3)));
}

/// A node's fencing counter for `resource` (0 when absent).
fn fence_counter(node: &RedisNode, resource: &str) -> u64 {
    get(node, &format!("{}:fence", lock_key(resource))).map_or(0, |c| c.parse().unwrap())
}

/// The worker: one blocking client acquiring and releasing the resource
/// until its stdin closes. Each grant is one line with its instants on
/// CLOCK_MONOTONIC; the last line is the count.
fn run_grant_worker(urls: &[String], label: &str) {
    use faults_support::clock::monotonic_nanos;
    use std::io::Read;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            stop.store(true, Ordering::Relaxed);
        });
    }
    // Retries 10-100 ms apart: with 1-10 ms the 8 contenders spent both
    // cores on refused attempts (about 60 grants/s instead of 150-250).
    let client = fencelock::blocking::Client::connect(
        builder_for(urls.iter().cloned())
            .node_timeout(GENEROUS_NODE_TIMEOUT)
            .retry(fencelock::RetryPolicy::new(ms(10), ms(100))),
    )
    .expect("worker client");
    let options = LockOptions::new(T16_TTL)
        .auto_renew(false)
        .wait(Duration::from_secs(30));
    let (mut grants, mut release_failures) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let requested = monotonic_nanos();
        let lock = client
            .acquire(T16_RESOURCE, options.clone())
            .unwrap_or_else(|e| panic!("{label}: acquire under contention: {e}"));
        let acquired = monotonic_nanos();
        let validity = lock.remaining();
        // Released once we stop relying on it: before the release call.
        let released = monotonic_nanos();
        // A node killed while the release is on its way can leave it short
        // of a quorum of deletions (`unavailable`).
        if let Err(e) = lock.release() {
            release_failures += 1;
            eprintln!("t16 {label}: release: {e}");
        }
        grants += 1;
        println!(
            "{T16_LINE}grant {requested} {acquired} {} {released} {}",
            validity.as_micros(),
            lock.fencing_token()
        );
    }
    println!("{T16_LINE}done {grants} {release_failures}");
}

/// T39: a raise counts only on nodes that granted. 3 nodes with counters
/// 4, 2, 0. B (ttl 5 s) takes node 3 first (counter 1) while its request to
/// node 2 is slow and node 1 is out of its reach. Then A (ttl 500 ms) gets
/// nodes 1 and 2 (5 and 3: token 5, to be raised), node 3 refuses it, and
/// A's link to node 2 breaks just as the raise is sent. Nodes 1 and 3
/// confirm the raise, but node 3 had already served B's INCR: counting it,
/// A would hand out 5, and B, once A's key on node 2 ran out, token 4 after
/// it (nodes 2 and 3 granted it at 4 and 1). Only a node holding our key
/// vouches for a raise: any later INCR there comes after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t39_a_raise_counts_only_on_nodes_that_granted() {
    const RESOURCE: &str = "t39";
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    for (node, counter) in nodes.iter().zip([4, 2, 0]) {
        node.command(&[
            "SET",
            &format!("fencelock:{{{RESOURCE}}}:fence"),
            &counter.to_string(),
        ]);
    }
    let b_links = proxies_for(&nodes);
    let b = builder_for(b_links.iter().map(FaultProxy::url))
        .node_timeout(ms(2000))
        .build()
        .await
        .unwrap();
    b_links[0].set(Mode::Blackhole);
    b_links[1].set(Mode::Delay {
        each_way: ms(700),
        jitter: Duration::ZERO,
    });
    let a_link_2 = FaultProxy::start(nodes[1].port());
    let a = builder_for([nodes[0].url(), a_link_2.url(), nodes[2].url()])
        .node_timeout(ms(1000))
        .build()
        .await
        .unwrap();
    a_link_2.set(Mode::ResetOnRequest(script_sha("RAISE_FENCE")));

    let b_acquire = tokio::spawn(async move {
        let lock = b.acquire(RESOURCE, LockOptions::new(ms(5000))).await;
        (b, lock)
    });
    assert!(
        wait_until(ms(1000), || get(&nodes[2], &lock_key(RESOURCE)).is_some()).await,
        "B never took node 3"
    );
    let a_result = a
        .acquire(
            RESOURCE,
            LockOptions::new(ms(500)).auto_renew(false).wait(Duration::ZERO),
        )
        .await;
    let (_b, b_result) = b_acquire.await.unwrap();
    let lock_b = b_result.expect("B takes nodes 2 and 3 once A's key on node 2 is gone");
    eprintln!(
        "t39: A: {:?}; B: token {}",
        a_result
            .as_ref()
            .map(|lock| lock.fencing_token())
            .map_err(ToString::to_string),
        lock_b.fencing_token()
    );
    if let Ok(lock_a) = &a_result {
        assert!(
            lock_b.fencing_token() > lock_a.fencing_token(),
            "B got token {} after A got {}: tokens went down in hand-out order",
            lock_b.fencing_token(),
            lock_a.fencing_token()
        );
    }
    assert!(
        a_link_2.stats().resets >= 1,
        "A's raise never reached the breaking link"
    );
}

//! T26 (reliability.md §3): lock tokens are unguessable. The generator is
//! crate-private, so tokens are observed the way an attacker with read access
//! to Redis would see them: the value of the lock key after an acquisition.
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
/// children that draw more after the fork.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t26_forked_children_draw_disjoint_tokens() {
    let per_process = scale("t26_fork", 5_000, 10_000);
    let node = RedisNode::start(&NodeOptions::default());
    let client = builder_for([node.url()]).build().await.unwrap();
    let mut sets = vec![(
        "test process".to_owned(),
        token_set(&draw_tokens(&client, &node, "t26:parent", per_process).await),
    )];
    for worker in 0..WORKERS {
        sets.extend(run_worker(&node, worker, per_process));
    }
    assert_eq!(sets.len(), 1 + WORKERS * (1 + FORKS), "a process did not report");
    for (i, (name, set)) in sets.iter().enumerate() {
        assert_eq!(set.len(), per_process, "{name}: duplicate or missing tokens");
        for (other, other_set) in &sets[i + 1..] {
            let shared = set.intersection(other_set).count();
            assert_eq!(shared, 0, "{name} and {other} share {shared} tokens");
        }
    }
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
fn run_worker(node: &RedisNode, worker: usize, count: usize) -> Vec<(String, HashSet<u128>)> {
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
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some(at) = line.find(LINE) else { continue };
        let (name, token) = line[at + LINE.len()..].split_once(' ').expect("name and token");
        match sets.iter_mut().find(|(n, _)| n == name) {
            Some((_, set)) => {
                set.insert(parse_token(token));
            }
            None => sets.push((name.to_owned(), HashSet::from([parse_token(token)]))),
        }
    }
    sets
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

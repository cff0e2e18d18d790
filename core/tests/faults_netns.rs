//! T18 and T19 in the kernel instead of the proxy (reliability.md §2 rows
//! 13 and 15): redis-server and the clients run inside a private network
//! namespace, where nftables rules on the loopback output hook drop every
//! packet to a node's port (a partition) or a random share of them (loss,
//! which TCP turns into 200 ms–1.5 s retransmission stalls; there is no
//! netem on these machines).
//!
//! Each test re-runs itself under `unshare --net` (root) or
//! `unshare --net --map-root-user`, so the rules and the namespace vanish
//! with the child. Without `unshare` or `nft` the tests print why and pass.

mod faults_support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use faults_support::*;
use fencelock::LockOptions;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const INSIDE: &str = "FENCELOCK_NETNS_INSIDE";
const TTL: Duration = Duration::from_millis(1000);

/// T19 (netns): 10 % packet loss to every node port. Over 40 uncontended
/// acquires (ttl 2 s) the reported validity never exceeds the bound (P3),
/// no two grants overlap, and at least 90 % succeed within one attempt's
/// retry budget (wait 1 s).
#[test]
fn t19_netns_packet_loss_keeps_validity_bounded() {
    if !enter_netns("t19_netns_packet_loss_keeps_validity_bounded") {
        return;
    }
    let runtime = runtime();
    runtime.block_on(async {
        let nodes = RedisNode::start_many(5, &NodeOptions::default());
        let client = builder_for(nodes.iter().map(RedisNode::url))
            .build()
            .await
            .unwrap();
        let nft = Nft::new();
        assert_rules_bite(&nft, &client, &nodes).await;
        nft.apply(&nodes.iter().map(|n| Rule::Loss(n.port(), 10)).collect::<Vec<_>>());
        let ttl = ms(2000);
        let history = History::new();
        let rounds = 40;
        let mut acquired = 0;
        for round in 0..rounds {
            let options = LockOptions::new(ttl).auto_renew(false).wait(ms(1000));
            if let Ok((lock, id)) = acquire_recorded(&client, &history, "A", "t19", options, ttl).await {
                acquired += 1;
                history.released(id, Instant::now());
                if lock.release().await.is_err() {
                    eprintln!("t19 netns: round {round}: release incomplete (lost packets); the key expires");
                    // Without the key gone, the next round would wait out the ttl.
                    nft.apply(&[]);
                    let _ = lock.release().await;
                    nft.apply(&nodes.iter().map(|n| Rule::Loss(n.port(), 10)).collect::<Vec<_>>());
                }
            }
        }
        nft.apply(&[]);
        eprintln!("t19 netns: {acquired}/{rounds} acquired under 10 % loss");
        assert_no_violations(&history.check(&CheckOptions::default()));
        assert!(acquired * 10 >= rounds * 9, "only {acquired}/{rounds} acquired");
    });
}

/// T18 (netns): the seeded nemesis with kernel faults: every 200–800 ms heal,
/// drop all packets to 1–3 random node ports (3 is a majority), or lose
/// 10–30 % on every node port. Counter exact, P1/P3/P9 over every grant,
/// and a client acquires within 2 × ttl of the heal. 8 s in CI, 60 s long.
#[test]
fn t18_netns_nemesis_keeps_the_counter_exact() {
    let test = "t18_netns_nemesis_keeps_the_counter_exact";
    if !enter_netns(test) {
        return;
    }
    let mut rng = StdRng::seed_from_u64(seed(test));
    let run_for = Duration::from_secs(scale("t18 netns seconds", 8, 60) as u64);
    runtime().block_on(async {
        let nodes = RedisNode::start_many(5, &NodeOptions::default());
        // Storage's port has no rule: only the lock nodes are faulted.
        let storage = RedisNode::start(&NodeOptions::default());
        let mut clients = Vec::new();
        for _ in 0..3 {
            clients.push(
                builder_for(nodes.iter().map(RedisNode::url))
                    .build()
                    .await
                    .unwrap(),
            );
        }
        let nft = Nft::new();
        let history = History::new();
        let (stop, increments) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let workers = counter_workers(&clients, "t18netns", TTL, &history, &storage, &stop, &increments);
        let started = Instant::now();
        let mut steps = 0;
        while started.elapsed() < run_for {
            nft.apply(&nemesis_step(&mut rng, &nodes));
            steps += 1;
            tokio::time::sleep(ms(rng.random_range(200..=800))).await;
        }
        nft.apply(&[]);
        stop.store(true, Ordering::Relaxed);
        for worker in workers {
            worker.await.unwrap();
        }
        let healed = clients[0]
            .acquire("t18netns", LockOptions::new(TTL).wait(TTL * 2))
            .await;
        assert!(
            healed.is_ok(),
            "no acquisition within 2 x ttl of the heal: {:?}",
            healed.err()
        );
        let counter: u64 = redis::cmd("GET")
            .arg("counter")
            .query(&mut storage.connection())
            .unwrap_or(0);
        let made = increments.load(Ordering::Relaxed);
        eprintln!(
            "t18 netns: {steps} nemesis steps, {} grants, {made} increments",
            history.len()
        );
        let mut violations = history.check(&CheckOptions::default());
        violations.extend(check_counter(made, counter));
        assert_no_violations(&violations);
        assert!(history.len() >= 5, "only {} grants in {run_for:?}", history.len());
    });
}

/// The rules must really cut the nodes off, or the runs prove nothing:
/// with every node port dropped an acquire fails as `unavailable`.
async fn assert_rules_bite(nft: &Nft, client: &fencelock::Client, nodes: &[RedisNode]) {
    nft.apply(&nodes.iter().map(|n| Rule::Drop(n.port())).collect::<Vec<_>>());
    let cut = client
        .acquire("t19:cut", LockOptions::new(ms(2000)).wait(Duration::ZERO))
        .await;
    let kind = cut.as_ref().map(|_| ()).map_err(fencelock::Error::kind);
    assert_eq!(
        kind,
        Err(fencelock::ErrorKind::Unavailable),
        "dropped ports still answered"
    );
    nft.apply(&[]);
}

/// One nemesis step: the rules to apply (none = heal).
fn nemesis_step(rng: &mut StdRng, nodes: &[RedisNode]) -> Vec<Rule> {
    match rng.random_range(0..10) {
        0..3 => Vec::new(),
        3..8 => {
            let cut = rng.random_range(1..=3);
            let mut ports: Vec<u16> = nodes.iter().map(RedisNode::port).collect();
            ports.sort_by_key(|_| rng.random::<u32>());
            ports.into_iter().take(cut).map(Rule::Drop).collect()
        }
        _ => {
            let percent = rng.random_range(10..=30);
            nodes.iter().map(|n| Rule::Loss(n.port(), percent)).collect()
        }
    }
}

/// True inside the namespace (run the test body). Outside, re-runs the test
/// under `unshare` and returns false; or prints why it cannot and returns
/// false.
fn enter_netns(test: &str) -> bool {
    if std::env::var(INSIDE).is_ok() {
        run(&["ip", "link", "set", "lo", "up"]);
        return true;
    }
    let unshare = match netns_support() {
        Ok(args) => args,
        Err(reason) => {
            eprintln!("{test}: SKIPPED, {reason}");
            return false;
        }
    };
    eprintln!("{test}: re-running inside `{}`", unshare.join(" "));
    let status = Command::new(unshare[0])
        .args(&unshare[1..])
        .arg(std::env::current_exe().expect("test binary path"))
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(INSIDE, "1")
        .status()
        .expect("run unshare");
    assert!(status.success(), "{test} failed inside the network namespace");
    false
}

/// The `unshare` command line that works here, or why none does.
fn netns_support() -> Result<Vec<&'static str>, String> {
    if Command::new("nft").arg("--version").output().is_err() {
        return Err("`nft` is not installed (nftables; scripts/ensure-deps.sh installs it)".into());
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let args: Vec<&str> = if root {
        vec!["unshare", "--net"]
    } else {
        vec!["unshare", "--net", "--map-root-user"]
    };
    let works = Command::new(args[0])
        .args(&args[1..])
        .arg("true")
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if works {
        Ok(args)
    } else {
        Err(format!(
            "`{} true` fails here (no network namespaces)",
            args.join(" ")
        ))
    }
}

/// One nftables rule on the loopback output hook.
#[derive(Clone, Copy, Debug)]
enum Rule {
    /// Every packet to the port is dropped: the node is cut off.
    Drop(u16),
    /// This percentage of packets to the port is dropped at random.
    Loss(u16, u8),
}

/// The namespace's own table; replaced whole on every `apply`.
struct Nft;

impl Nft {
    fn new() -> Nft {
        nft_script(
            "add table inet fencelock\nadd chain inet fencelock out { type filter hook output priority 0; }\n",
        );
        Nft
    }

    /// Replaces the rules atomically (one `nft -f` transaction).
    fn apply(&self, rules: &[Rule]) {
        let mut script = String::from("flush chain inet fencelock out\n");
        for rule in rules {
            script.push_str(&match rule {
                Rule::Drop(port) => format!("add rule inet fencelock out tcp dport {port} drop\n"),
                Rule::Loss(port, percent) => format!(
                    "add rule inet fencelock out tcp dport {port} numgen random mod 100 < {percent} drop\n"
                ),
            });
        }
        nft_script(&script);
    }
}

fn nft_script(script: &str) {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("run nft");
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "nft refused:\n{script}");
}

fn run(command: &[&str]) {
    let status = Command::new(command[0]).args(&command[1..]).status();
    assert!(status.is_ok_and(|s| s.success()), "{command:?} failed");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

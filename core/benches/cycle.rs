//! Lock-cycle benchmark: fencelock against the bare Redis protocol, on real
//! `redis-server` processes started by `fencelock-harness`.
//!
//! What it measures, in one run:
//!
//! 1. Acquire+release cycle latency (p50/p99) and throughput with 32
//!    concurrent tasks on distinct keys, on 1 and 5 nodes, each beside a
//!    FLOOR measured against the same nodes: the bare protocol through the
//!    `redis` crate (one multiplexed connection per node; `SET key val NX PX
//!    ttl`, then an `EVALSHA` compare-and-delete; on 5 nodes both steps go to
//!    every node in parallel and wait for all). Beside it a second bare
//!    client, the FENCED FLOOR, acquires with fencelock's acquire script
//!    instead (`SET NX PX` and the fencing `INCR` in one `EVALSHA`, as the
//!    protocol requires): the gap between the two floors is what issuing a
//!    fencing token atomically with the grant costs Redis, which no client
//!    can avoid; the gap between the fenced floor and fencelock is what our
//!    client adds. The three alternate in rounds so that background load
//!    hits all alike. Beside each row, the CPU time this process and the
//!    redis-servers spent per cycle: on a small machine where client and
//!    nodes share the cores, that is what bounds throughput.
//! 2. Scaling: single-task sequential cycle p50 at 1, 3, 5 and 7 nodes.
//! 3. The watchdog at scale: one client holding 10,000 auto-renewed locks on
//!    one node; process RSS and the renewal traffic seen by Redis
//!    (`INFO stats`, `commandstats`, `errorstats`, `clients`). It runs first,
//!    while the heap is fresh, but is printed last.
//!
//! The targets are printed beside the results as PASS/MISS; a miss never
//! fails the run (this is a report, not a test). Other load on the machine
//! shows in the results: the load average is printed at the start and end.
//!
//! Run it with `cargo bench -p fencelock --bench cycle` (about a minute after the build).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fencelock::{Client, Lock, LockOptions};
use fencelock_harness::{NodeOptions, RedisNode};
use futures_util::StreamExt;
use futures_util::future::join_all;
use redis::Value;
use redis::aio::MultiplexedConnection;

/// Concurrent tasks of the throughput measurements.
const TASKS: usize = 32;
/// Lock ttl of the cycle measurements: long enough that no renewal happens.
const CYCLE_TTL: Duration = Duration::from_secs(10);
/// Floor and fencelock alternate this many times per configuration.
const ROUNDS: usize = 2;
/// Per round: cycles run but not recorded, then cycles recorded.
const WARM_UP: Duration = Duration::from_millis(300);
const MEASURED: Duration = Duration::from_millis(1250);
/// Node counts of the scaling section.
const SCALING_NODES: [usize; 4] = [1, 3, 5, 7];
/// Locks held at once by the watchdog section, their ttl, and for how long.
const HELD_LOCKS: usize = 10_000;
const HOLD_TTL: Duration = Duration::from_secs(3);
const HOLD_FOR: Duration = Duration::from_secs(6);
/// Acquisitions or releases in flight while taking or freeing the held locks.
const BULK_CONCURRENCY: usize = 64;

/// The compare-and-delete release of the floor (the same script as fencelock's;
/// [`protocol_sha`] checks the copy).
const RELEASE_SCRIPT: &str = r#"
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if current == false then return -1 end
return 0
"#;

/// fencelock's acquire script (`core/src/scripts.rs`), run by the fenced floor
/// ([`protocol_sha`] checks the copy).
const ACQUIRE_SCRIPT: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"#;

/// Gives every measurement its own keys, so nothing left over can block it.
static MEASUREMENT: AtomicU64 = AtomicU64::new(0);

type CycleResult = Result<(), String>;

#[tokio::main]
async fn main() {
    print_header();
    let nodes = RedisNode::start_many(*SCALING_NODES.iter().max().unwrap_or(&1), &NodeOptions::default());
    // First, while the heap is fresh, so its RSS figures are not blurred by earlier runs.
    let watchdog = watchdog_at_scale(&nodes[0]).await;
    let throughput = [
        compare(&nodes[..1], TASKS).await,
        compare(&nodes[..5], TASKS).await,
    ];
    let mut scaling = Vec::new();
    for n in SCALING_NODES {
        scaling.push(compare(&nodes[..n], 1).await);
    }
    print_throughput(&throughput);
    print_scaling(&scaling);
    print_watchdog(&watchdog);
    println!("\nload average at the end: {}", load_average());
}

fn print_header() {
    println!("fencelock cycle benchmark");
    println!(
        "cores: {}, load average at the start: {}",
        cores(),
        load_average()
    );
    println!("(numbers are from loopback redis-server processes sharing the machine with the client)");
}

// ---------------------------------------------------------------------------
// Measuring cycles

/// Recorded cycle latencies of one measurement and its recorded window; and
/// the CPU time this process and the nodes used over all its cycles, warm-up included.
#[derive(Default)]
struct Measurement {
    samples: Vec<Duration>,
    window: Duration,
    errors: u64,
    first_error: Option<String>,
    all_cycles: u64,
    client_cpu: Duration,
    server_cpu: Duration,
    /// Socket reads and commands (those run inside scripts included) of all
    /// nodes over all cycles: how well requests were batched, and whether
    /// a cycle sends more than it should.
    server_reads: u64,
    server_commands: u64,
}

impl Measurement {
    fn merge(&mut self, other: Measurement) {
        self.samples.extend(other.samples);
        self.window += other.window;
        self.errors += other.errors;
        self.first_error = self.first_error.take().or(other.first_error);
        self.all_cycles += other.all_cycles;
        self.client_cpu += other.client_cpu;
        self.server_cpu += other.server_cpu;
        self.server_reads += other.server_reads;
        self.server_commands += other.server_commands;
    }

    fn sort(&mut self) {
        self.samples.sort_unstable();
    }

    /// The `q` quantile (0..=1) of the sorted samples.
    fn quantile(&self, q: f64) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        let rank = (q * self.samples.len() as f64).ceil() as usize;
        self.samples[rank.clamp(1, self.samples.len()) - 1]
    }

    fn p50(&self) -> Duration {
        self.quantile(0.50)
    }

    fn p99(&self) -> Duration {
        self.quantile(0.99)
    }

    fn per_second(&self) -> f64 {
        self.samples.len() as f64 / self.window.as_secs_f64().max(f64::EPSILON)
    }

    /// CPU time per cycle, in µs: (this process, the nodes together).
    fn cpu_per_cycle(&self) -> (f64, f64) {
        let cycles = self.all_cycles.max(1) as f64;
        (micros(self.client_cpu) / cycles, micros(self.server_cpu) / cycles)
    }

    /// Per cycle, over all nodes: (socket reads, commands).
    fn server_work_per_cycle(&self) -> (f64, f64) {
        let cycles = self.all_cycles.max(1) as f64;
        (
            self.server_reads as f64 / cycles,
            self.server_commands as f64 / cycles,
        )
    }
}

/// What a measurement runs: how many tasks, and which node processes' CPU to count.
#[derive(Clone, Copy)]
struct Setup<'a> {
    tasks: usize,
    server_pids: &'a [u32],
    /// One plain connection per node, for its `INFO stats`.
    probes: &'a [MultiplexedConnection],
}

/// Runs `cycle` in a loop from `setup.tasks` tasks, each on its own key, for
/// `WARM_UP` unrecorded and then `MEASURED` recorded.
async fn measure<F, Fut>(setup: Setup<'_>, cycle: F) -> Measurement
where
    F: Fn(Arc<str>, u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = CycleResult> + Send + 'static,
{
    let id = MEASUREMENT.fetch_add(1, Ordering::Relaxed);
    let (client_cpu, server_cpu) = (cpu_time("self"), servers_cpu_time(setup.server_pids));
    let stats_before = servers_stats(setup.probes).await;
    let record_from = Instant::now() + WARM_UP;
    let stop_at = record_from + MEASURED;
    let handles: Vec<_> = (0..setup.tasks)
        .map(|task| {
            let key: Arc<str> = format!("bench:{id}:{task}").into();
            tokio::spawn(drive(key, cycle.clone(), record_from, stop_at))
        })
        .collect();
    let mut total = Measurement::default();
    for handle in handles {
        total.merge(handle.await.expect("a benchmark task panicked"));
    }
    // Cycles that began before `stop_at` finish after it: count the real window.
    total.window = record_from.elapsed();
    total.client_cpu = cpu_time("self").saturating_sub(client_cpu);
    total.server_cpu = servers_cpu_time(setup.server_pids).saturating_sub(server_cpu);
    let stats = servers_stats(setup.probes).await;
    total.server_reads = stats.0 - stats_before.0;
    total.server_commands = stats.1 - stats_before.1;
    total.sort();
    total
}

/// One task's loop: cycles back to back, recorded once `record_from` has passed.
async fn drive<F, Fut>(key: Arc<str>, cycle: F, record_from: Instant, stop_at: Instant) -> Measurement
where
    F: Fn(Arc<str>, u64) -> Fut,
    Fut: Future<Output = CycleResult>,
{
    let mut out = Measurement::default();
    for seq in 0u64.. {
        let began = Instant::now();
        if began >= stop_at {
            break;
        }
        let result = cycle(key.clone(), seq).await;
        out.all_cycles += 1;
        if began < record_from {
            continue;
        }
        match result {
            Ok(()) => out.samples.push(began.elapsed()),
            Err(err) => {
                out.errors += 1;
                out.first_error.get_or_insert(err);
            }
        }
    }
    out
}

/// fencelock and the two floors measured on the same nodes.
struct Comparison {
    nodes: usize,
    floor: Measurement,
    fenced_floor: Measurement,
    ours: Measurement,
}

/// The floors and fencelock on `nodes` with `tasks` tasks each, alternating
/// rounds so that background load hits all alike.
async fn compare(nodes: &[RedisNode], tasks: usize) -> Comparison {
    let urls: Vec<String> = nodes.iter().map(RedisNode::url).collect();
    let server_pids: Vec<u32> = nodes.iter().filter_map(RedisNode::pid).collect();
    let probes = connect_probes(&urls).await;
    let setup = Setup {
        tasks,
        server_pids: &server_pids,
        probes: &probes,
    };
    let floor = Floor::connect(&urls, FloorAcquire::Set).await;
    let fenced_floor = Floor::connect(&urls, FloorAcquire::FencingScript).await;
    let client = connect_ours(&urls).await;
    let mut comparison = Comparison {
        nodes: nodes.len(),
        floor: Measurement::default(),
        fenced_floor: Measurement::default(),
        ours: Measurement::default(),
    };
    for _ in 0..ROUNDS {
        comparison.floor.merge(measure_floor(&floor, setup).await);
        comparison
            .fenced_floor
            .merge(measure_floor(&fenced_floor, setup).await);
        comparison.ours.merge(measure_ours(&client, setup).await);
    }
    comparison.floor.sort();
    comparison.fenced_floor.sort();
    comparison.ours.sort();
    comparison
}

/// fencelock's cycle: `acquire` then `release` through the public API.
async fn measure_ours(client: &Client, setup: Setup<'_>) -> Measurement {
    let client = client.clone();
    measure(setup, move |key, _seq| {
        let client = client.clone();
        async move {
            let lock = client
                .acquire(&key, LockOptions::new(CYCLE_TTL))
                .await
                .map_err(|e| e.to_string())?;
            lock.release().await.map_err(|e| e.to_string())
        }
    })
    .await
}

/// The floor's cycle on the same nodes.
async fn measure_floor(floor: &Arc<Floor>, setup: Setup<'_>) -> Measurement {
    let floor = floor.clone();
    measure(setup, move |key, seq| {
        let floor = floor.clone();
        async move { floor.cycle(&key, seq).await }
    })
    .await
}

async fn connect_ours(urls: &[String]) -> Client {
    Client::builder()
        .nodes(urls.iter().cloned())
        .build()
        .await
        .expect("build the fencelock client")
}

// ---------------------------------------------------------------------------
// The floor: the bare protocol through the redis crate

/// How a bare-protocol client takes the lock.
#[derive(Clone, Copy, PartialEq)]
enum FloorAcquire {
    /// `SET key token NX PX ttl`: the floor the issue sets.
    Set,
    /// fencelock's acquire script: the same `SET` and the fencing `INCR`.
    FencingScript,
}

/// One multiplexed connection per node and the scripts' SHAs.
struct Floor {
    connections: Vec<MultiplexedConnection>,
    acquire: FloorAcquire,
    acquire_sha: String,
    release_sha: String,
}

impl Floor {
    async fn connect(urls: &[String], acquire: FloorAcquire) -> Arc<Floor> {
        let mut connections = Vec::new();
        let (mut acquire_sha, mut release_sha) = (String::new(), String::new());
        for url in urls {
            let client = redis::Client::open(url.as_str()).expect("a valid node URL");
            let mut connection = client
                .get_multiplexed_async_connection()
                .await
                .expect("connect the floor to a node");
            acquire_sha = load_script(&mut connection, ACQUIRE_SCRIPT, "ACQUIRE").await;
            release_sha = load_script(&mut connection, RELEASE_SCRIPT, "RELEASE").await;
            connections.push(connection);
        }
        Arc::new(Floor {
            connections,
            acquire,
            acquire_sha,
            release_sha,
        })
    }

    /// Acquire on every node, then compare-and-delete on every node.
    async fn cycle(&self, key: &str, seq: u64) -> CycleResult {
        let token = format!("{seq:032x}");
        let ttl_ms = CYCLE_TTL.as_millis().to_string();
        let key = match self.acquire {
            FloorAcquire::Set => {
                let key = format!("floor:{key}");
                let set = redis::cmd("SET")
                    .arg(&key)
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(&ttl_ms)
                    .clone();
                self.everywhere(&set, |reply| matches!(reply, Value::Okay))
                    .await?;
                key
            }
            FloorAcquire::FencingScript => {
                let key = format!("fenced-floor:{{{key}}}");
                let acquire = redis::cmd("EVALSHA")
                    .arg(&self.acquire_sha)
                    .arg(2)
                    .arg(&key)
                    .arg(format!("{key}:fence"))
                    .arg(&token)
                    .arg(&ttl_ms)
                    .clone();
                self.everywhere(&acquire, |reply| matches!(reply, Value::Int(n) if *n >= 1))
                    .await?;
                key
            }
        };
        let release = redis::cmd("EVALSHA")
            .arg(&self.release_sha)
            .arg(1)
            .arg(&key)
            .arg(&token)
            .clone();
        self.everywhere(&release, |reply| matches!(reply, Value::Int(1)))
            .await
    }

    /// Sends `cmd` to every node in parallel and waits for all the replies.
    async fn everywhere(&self, cmd: &redis::Cmd, ok: impl Fn(&Value) -> bool) -> CycleResult {
        let replies = join_all(self.connections.iter().map(|connection| {
            let mut connection = connection.clone();
            async move { cmd.query_async::<Value>(&mut connection).await }
        }))
        .await;
        for reply in replies {
            match reply {
                Ok(value) if ok(&value) => {}
                Ok(value) => return Err(format!("unexpected reply {value:?}")),
                Err(err) => return Err(err.to_string()),
            }
        }
        Ok(())
    }
}

/// Loads the floor's copy of protocol script `name`; refuses a copy that is
/// no longer the protocol's, which would measure something else.
async fn load_script(connection: &mut MultiplexedConnection, script: &str, name: &str) -> String {
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script)
        .query_async(connection)
        .await
        .expect("SCRIPT LOAD");
    assert_eq!(
        sha,
        protocol_sha(name),
        "the bench's copy of {name} differs from tests/vectors/protocol.json: copy it from core/src/scripts.rs"
    );
    sha
}

/// The SHA1 that `tests/vectors/protocol.json` gives protocol script `name`.
fn protocol_sha(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/protocol.json");
    let text = std::fs::read_to_string(path).expect("read tests/vectors/protocol.json");
    let vectors: serde_json::Value = serde_json::from_str(&text).expect("protocol.json is JSON");
    vectors["scripts"][name]
        .as_str()
        .unwrap_or_else(|| panic!("protocol.json has no script {name}"))
        .to_owned()
}

// ---------------------------------------------------------------------------
// Section 1: throughput against the floor

fn print_throughput(comparisons: &[Comparison]) {
    println!(
        "\n1. Acquire+release cycle, {TASKS} concurrent tasks on distinct keys \
         ({ROUNDS} alternating rounds of {WARM_UP:?} warm-up + {MEASURED:?} measured per side)"
    );
    println!(
        "   {:>5}  {:<12}  {:>8}  {:>7}  {:>7}  {:>9}  {:>6}  {:>18}  {:>18}  {:>10}  {:>9}",
        "nodes",
        "client",
        "cycles",
        "p50 µs",
        "p99 µs",
        "cycles/s",
        "errors",
        "client CPU µs/cyc",
        "redis CPU µs/cyc",
        "reads/cyc",
        "cmds/cyc"
    );
    for c in comparisons {
        print_measurement_row(c.nodes, "floor", &c.floor);
        print_measurement_row(c.nodes, "fenced floor", &c.fenced_floor);
        print_measurement_row(c.nodes, "fencelock", &c.ours);
    }
    println!(
        "\n   {:<33}  {:>7}  {:>8}  result",
        "ratio (fencelock / floor)", "value", "target"
    );
    for c in comparisons {
        let p50_target = if c.nodes == 1 { 1.15 } else { 1.3 };
        let p50 = ratio(micros(c.ours.p50()), micros(c.floor.p50()));
        let rate = ratio(c.ours.per_second(), c.floor.per_second());
        let nodes = nodes_label(c.nodes);
        print_ratio(&format!("{nodes}: p50 latency"), p50, Target::AtMost(p50_target));
        print_ratio(&format!("{nodes}: throughput"), rate, Target::AtLeast(0.85));
    }
    println!(
        "   (with {TASKS} tasks in a closed loop, p50 tracks {TASKS} / throughput: both ratios mostly say \
         the same thing)"
    );
    println!(
        "\n   {:<33}  {:>7}  {:>20}",
        "where the gap is", "value", "fenced floor / floor"
    );
    for c in comparisons {
        let nodes = nodes_label(c.nodes);
        let ours = ratio(c.ours.per_second(), c.fenced_floor.per_second());
        let protocol = ratio(c.fenced_floor.per_second(), c.floor.per_second());
        println!(
            "   {:<33}  {ours:>6.2}×  {protocol:>19.2}×",
            format!("{nodes}: throughput / fenced floor")
        );
    }
    println!(
        "   (fenced floor / floor: what the atomic fencing INCR costs any client; fencelock / fenced floor: \
         what our client adds)"
    );
    for (nodes, m) in comparisons.iter().flat_map(|c| {
        [
            (c.nodes, &c.floor),
            (c.nodes, &c.fenced_floor),
            (c.nodes, &c.ours),
        ]
    }) {
        if let Some(err) = &m.first_error {
            println!("   note: {nodes}-node run had {} errors, first: {err}", m.errors);
        }
    }
}

fn nodes_label(nodes: usize) -> String {
    format!("{nodes} node{}", if nodes == 1 { "" } else { "s" })
}

fn print_measurement_row(nodes: usize, client: &str, m: &Measurement) {
    let (client_cpu, server_cpu) = m.cpu_per_cycle();
    let (reads, commands) = m.server_work_per_cycle();
    println!(
        "   {:>5}  {:<12}  {:>8}  {:>7.0}  {:>7.0}  {:>9.0}  {:>6}  {:>18.1}  {:>18.1}  {:>10.2}  {:>9.2}",
        nodes,
        client,
        m.samples.len(),
        micros(m.p50()),
        micros(m.p99()),
        m.per_second(),
        m.errors,
        client_cpu,
        server_cpu,
        reads,
        commands
    );
}

/// A target ratio from the issue.
#[derive(Clone, Copy)]
enum Target {
    AtMost(f64),
    AtLeast(f64),
}

fn print_ratio(what: &str, value: f64, target: Target) {
    let (relation, bound, pass) = match target {
        Target::AtMost(bound) => ("≤", bound, value <= bound),
        Target::AtLeast(bound) => ("≥", bound, value >= bound),
    };
    println!(
        "   {what:<33}  {value:>6.2}×  {relation} {bound:.2}×  {}",
        verdict(pass)
    );
}

// ---------------------------------------------------------------------------
// Section 2: scaling with the number of nodes

fn print_scaling(rows: &[Comparison]) {
    println!("\n2. Scaling: one task, sequential acquire+release cycles (same rounds as above)");
    println!(
        "   {:>5}  {:>14}  {:>14}  {:>14}  {:>14}  {:>12}",
        "nodes", "fencelock p50", "fencelock p99", "floor p50", "floor p99", "p50 vs floor"
    );
    for row in rows {
        println!(
            "   {:>5}  {:>11.0} µs  {:>11.0} µs  {:>11.0} µs  {:>11.0} µs  {:>11.2}×",
            row.nodes,
            micros(row.ours.p50()),
            micros(row.ours.p99()),
            micros(row.floor.p50()),
            micros(row.floor.p99()),
            ratio(micros(row.ours.p50()), micros(row.floor.p50()))
        );
    }
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return;
    };
    let ours = ratio(micros(last.ours.p50()), micros(first.ours.p50()));
    let floor = ratio(micros(last.floor.p50()), micros(first.floor.p50()));
    println!();
    print_ratio(
        &format!("fencelock p50 {}n / {}n", last.nodes, first.nodes),
        ours,
        Target::AtMost(1.4),
    );
    println!(
        "   {:<33}  {:>6.2}×  (for reference)",
        format!("floor p50 {}n / {}n", last.nodes, first.nodes),
        floor
    );
    println!(
        "   ({} redis-servers and this process share {} cores here: the floor's own growth shows how much \
         of the ratio is the machine)",
        last.nodes,
        cores()
    );
}

// ---------------------------------------------------------------------------
// Section 3: the watchdog at scale

/// Counters from one node's `INFO stats`, `commandstats`, `errorstats` and `clients`.
#[derive(Clone, Default)]
struct ServerStats {
    /// Calls per command (`cmdstat_<name>`); commands run inside scripts count too.
    calls: Counters,
    /// Calls per command that ended in an error reply.
    failed: Counters,
    /// Error replies per error code (`errorstat_<CODE>`), e.g. `NOSCRIPT`.
    errors: Counters,
    commands: u64,
    reads: u64,
    net_input_bytes: u64,
    connected_clients: u64,
}

type Counters = BTreeMap<String, u64>;

impl ServerStats {
    async fn read(probe: &mut MultiplexedConnection) -> ServerStats {
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .arg("commandstats")
            .arg("errorstats")
            .arg("clients")
            .query_async(probe)
            .await
            .expect("INFO from the node");
        let fields: HashMap<&str, &str> = info
            .lines()
            .filter_map(|line| line.trim_end().split_once(':'))
            .collect();
        let number = |name: &str| fields.get(name).and_then(|v| v.parse().ok()).unwrap_or(0);
        ServerStats {
            calls: counters(&fields, "cmdstat_", "calls"),
            failed: counters(&fields, "cmdstat_", "failed_calls"),
            errors: counters(&fields, "errorstat_", "count"),
            commands: number("total_commands_processed"),
            reads: number("total_reads_processed"),
            net_input_bytes: number("total_net_input_bytes"),
            connected_clients: number("connected_clients"),
        }
    }

    fn since(&self, earlier: &ServerStats) -> ServerStats {
        ServerStats {
            calls: counters_since(&self.calls, &earlier.calls),
            failed: counters_since(&self.failed, &earlier.failed),
            errors: counters_since(&self.errors, &earlier.errors),
            commands: self.commands - earlier.commands,
            reads: self.reads - earlier.reads,
            net_input_bytes: self.net_input_bytes - earlier.net_input_bytes,
            connected_clients: self.connected_clients,
        }
    }

    fn calls_of(&self, command: &str) -> u64 {
        self.calls.get(command).copied().unwrap_or(0)
    }

    /// Calls of `command` that did not end in an error.
    fn succeeded(&self, command: &str) -> u64 {
        self.calls_of(command) - self.failed.get(command).copied().unwrap_or(0)
    }
}

/// `name -> value of key` for the INFO lines `<prefix>name:key=value,...`.
fn counters(fields: &HashMap<&str, &str>, prefix: &str, key: &str) -> Counters {
    fields
        .iter()
        .filter_map(|(name, value)| {
            let name = name.strip_prefix(prefix)?;
            let n = value
                .split(',')
                .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))?
                .parse()
                .ok()?;
            Some((name.to_owned(), n))
        })
        .collect()
}

/// The growth of each counter, leaving out those that did not move.
fn counters_since(now: &Counters, earlier: &Counters) -> Counters {
    now.iter()
        .map(|(name, &n)| (name.clone(), n - earlier.get(name).copied().unwrap_or(0)))
        .filter(|&(_, n)| n > 0)
        .collect()
}

fn show_counters(counters: &Counters) -> String {
    if counters.is_empty() {
        return "none".to_owned();
    }
    let shown: Vec<String> = counters.iter().map(|(name, n)| format!("{name} {n}")).collect();
    shown.join(", ")
}

struct WatchdogReport {
    rss_before_kb: u64,
    rss_idle_kb: u64,
    rss_acquired_kb: u64,
    rss_holding_kb: u64,
    acquired: usize,
    acquire_time: Duration,
    window: Duration,
    server: ServerStats,
    client_renewals: u64,
    still_held: usize,
    released: usize,
}

async fn watchdog_at_scale(node: &RedisNode) -> WatchdogReport {
    let mut probe = connect_probes(&[node.url()]).await.remove(0);
    let rss_before_kb = rss_kb();
    let client = Client::builder()
        .node(node.url())
        .build()
        .await
        .expect("build the fencelock client");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_idle_kb = rss_kb();

    let started = Instant::now();
    let locks = acquire_many(&client, HELD_LOCKS).await;
    let acquire_time = started.elapsed();
    // The first renewals are due ttl/3 after each grant: this is still before them.
    let rss_acquired_kb = rss_kb();

    let before = ServerStats::read(&mut probe).await;
    let renewals_before = total_renewals(&locks);
    let window_start = Instant::now();
    let rss_holding_kb = peak_rss_for(HOLD_FOR).await;
    let after = ServerStats::read(&mut probe).await;
    let window = window_start.elapsed();
    let client_renewals = total_renewals(&locks) - renewals_before;
    let still_held = locks.iter().filter(|lock| lock.is_held()).count();

    let acquired = locks.len();
    let released = release_all(locks).await;
    WatchdogReport {
        rss_before_kb,
        rss_idle_kb,
        rss_acquired_kb,
        rss_holding_kb,
        acquired,
        acquire_time,
        window,
        server: after.since(&before),
        client_renewals,
        still_held,
        released,
    }
}

/// Takes `count` locks with auto-renewal on, `BULK_CONCURRENCY` at a time.
async fn acquire_many(client: &Client, count: usize) -> Vec<Lock> {
    futures_util::stream::iter(0..count)
        .map(|i| {
            let client = client.clone();
            async move {
                client
                    .acquire(&format!("held:{i}"), LockOptions::new(HOLD_TTL))
                    .await
                    .expect("acquire a lock to hold")
            }
        })
        .buffer_unordered(BULK_CONCURRENCY)
        .collect()
        .await
}

/// Releases every lock, `BULK_CONCURRENCY` at a time; returns how many released cleanly.
async fn release_all(locks: Vec<Lock>) -> usize {
    futures_util::stream::iter(locks)
        .map(|lock| async move { lock.release().await.is_ok() })
        .buffer_unordered(BULK_CONCURRENCY)
        .filter(|released| std::future::ready(*released))
        .count()
        .await
}

fn total_renewals(locks: &[Lock]) -> u64 {
    locks.iter().map(|lock| u64::from(lock.renewals())).sum()
}

/// Samples VmRSS every 100 ms for `duration`; returns the highest sample.
async fn peak_rss_for(duration: Duration) -> u64 {
    let until = Instant::now() + duration;
    let mut peak = rss_kb();
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        peak = peak.max(rss_kb());
    }
    peak
}

fn print_watchdog(r: &WatchdogReport) {
    println!(
        "\n3. Watchdog at scale: one client, 1 node, {} locks (ttl {HOLD_TTL:?}, auto-renew every ttl/3) \
         held for {:.1} s",
        r.acquired,
        r.window.as_secs_f64()
    );
    println!(
        "   acquired in {:.2} s ({:.0} locks/s, {BULK_CONCURRENCY} in flight); still held at the end: {}; \
         released cleanly: {}",
        r.acquire_time.as_secs_f64(),
        r.acquired as f64 / r.acquire_time.as_secs_f64(),
        r.still_held,
        r.released
    );
    print_watchdog_memory(r);
    print_watchdog_traffic(r);
}

fn print_watchdog_memory(r: &WatchdogReport) {
    println!(
        "   RSS: before the client {:.1} MB; idle client {:.1} MB; all locks taken, before any renewal \
         {:.1} MB; peak while renewing {:.1} MB",
        mb(r.rss_before_kb),
        mb(r.rss_idle_kb),
        mb(r.rss_acquired_kb),
        mb(r.rss_holding_kb)
    );
    let over_idle_kb = r.rss_holding_kb.saturating_sub(r.rss_idle_kb);
    let per_lock = |kb: u64| kb as f64 * 1024.0 / r.acquired as f64;
    println!(
        "   {:<38}  {:>6.1} MB  ≤ 20 MB  {}   ({:.0} bytes per held lock; {:.0} before any renewal)",
        "RSS over the idle client (peak)",
        mb(over_idle_kb),
        verdict(mb(over_idle_kb) <= 20.0),
        per_lock(over_idle_kb),
        per_lock(r.rss_acquired_kb.saturating_sub(r.rss_idle_kb))
    );
}

fn print_watchdog_traffic(r: &WatchdogReport) {
    let secs = r.window.as_secs_f64();
    let s = &r.server;
    // A renewal is one run of the extend script, by EVALSHA or by the EVAL fallback.
    let renewals = s.succeeded("evalsha") + s.succeeded("eval");
    let requests = s.calls_of("evalsha") + s.calls_of("eval");
    println!("   renewal traffic seen by the node over the window:");
    println!(
        "     renewal scripts run              {:>9}  = {:.0}/s, {:.2} per lock per s (expected {:.2})",
        renewals,
        renewals as f64 / secs,
        renewals as f64 / secs / r.acquired as f64,
        3.0 / HOLD_TTL.as_secs_f64()
    );
    println!(
        "     renewals counted by the client   {:>9}  (sum of Lock::renewals deltas)",
        r.client_renewals
    );
    println!(
        "     commands processed, all          {:>9}  ({}; commands run inside scripts count too)",
        s.commands,
        show_counters(&s.calls)
    );
    println!(
        "     failed calls / error replies     {:>9}  (failed: {}; errors: {})",
        s.failed.values().sum::<u64>(),
        show_counters(&s.failed),
        show_counters(&s.errors)
    );
    println!(
        "     socket reads processed           {:>9}  = {:.0} script requests per read",
        s.reads,
        requests as f64 / s.reads.max(1) as f64
    );
    println!(
        "     bytes received                   {:>9}  = {:.0} bytes per renewal",
        s.net_input_bytes,
        s.net_input_bytes as f64 / renewals.max(1) as f64
    );
    println!(
        "     connected clients                {:>9}  (fencelock's one connection + this probe)",
        s.connected_clients
    );
    print_batching_note(requests as f64 / s.reads.max(1) as f64);
}

/// What the renewals-per-read figure says about batching, and what it cannot say.
fn print_batching_note(per_read: f64) {
    println!(
        "   The watchdog is meant to pipeline the locks that fall due together into one request per node \
         per tick. Round trips are not visible to Redis; socket reads are a proxy (one large pipeline can \
         take several reads)."
    );
    if per_read >= 10.0 {
        println!("   {per_read:.0} script requests per socket read: they arrive batched.");
    } else {
        println!("   {per_read:.1} script requests per socket read: no clear sign of batching.");
    }
}

// ---------------------------------------------------------------------------
// Small helpers

/// This process's resident set size in kB, from /proc/self/status.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system, all threads) used so far by process `pid`, or
/// `"self"`, from /proc/PID/stat. Linux reports it in USER_HZ = 100 ticks per second.
fn cpu_time(pid: &str) -> Duration {
    const TICK: Duration = Duration::from_millis(10);
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u32 = after_name
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|field| field.parse::<u32>().ok())
        .sum();
    TICK * ticks
}

/// (socket reads, commands processed) summed over the nodes behind `probes`.
async fn servers_stats(probes: &[MultiplexedConnection]) -> (u64, u64) {
    let mut total = (0, 0);
    for probe in probes {
        let stats = ServerStats::read(&mut probe.clone()).await;
        total.0 += stats.reads;
        total.1 += stats.commands;
    }
    total
}

async fn connect_probes(urls: &[String]) -> Vec<MultiplexedConnection> {
    let mut probes = Vec::new();
    for url in urls {
        let client = redis::Client::open(url.as_str()).expect("a valid node URL");
        probes.push(
            client
                .get_multiplexed_async_connection()
                .await
                .expect("connect the INFO probe"),
        );
    }
    probes
}

fn servers_cpu_time(pids: &[u32]) -> Duration {
    pids.iter().map(|pid| cpu_time(&pid.to_string())).sum()
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn ratio(ours: f64, floor: f64) -> f64 {
    if floor > 0.0 { ours / floor } else { f64::NAN }
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

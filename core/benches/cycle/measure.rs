//! Measuring cycles: a cycle run in a loop from many tasks, timed, with the
//! CPU time and the node work it cost; fencelock and the floors side by side.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fencelock::{Client, LockOptions};
use fencelock_harness::RedisNode;
use redis::aio::MultiplexedConnection;

use crate::floor::{Floor, FloorAcquire};
use crate::proc::{cpu_time, servers_cpu_time};
use crate::server_stats::{connect_probes, servers_stats};
use crate::util::{micros, quantile};

/// Concurrent tasks of the throughput measurements.
pub const TASKS: usize = 32;
/// Lock ttl of the cycle measurements: long enough that no renewal happens.
pub const CYCLE_TTL: Duration = Duration::from_secs(10);
/// Floor and fencelock alternate this many times per configuration.
pub const ROUNDS: usize = 2;
/// Per round: cycles run but not recorded, then cycles recorded.
pub const WARM_UP: Duration = Duration::from_millis(300);
pub const MEASURED: Duration = Duration::from_millis(1250);

/// Gives every measurement its own keys, so nothing left over can block it.
static MEASUREMENT: AtomicU64 = AtomicU64::new(0);

pub type CycleResult = Result<(), String>;

/// Recorded cycle latencies of one measurement and its recorded window; and
/// the CPU time this process and the nodes used over all its cycles, warm-up included.
#[derive(Default)]
pub struct Measurement {
    pub samples: Vec<Duration>,
    window: Duration,
    pub errors: u64,
    pub first_error: Option<String>,
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
    pub fn merge(&mut self, other: Measurement) {
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

    pub fn sort(&mut self) {
        self.samples.sort_unstable();
    }

    /// The `q` quantile (0..=1) of the sorted samples.
    fn quantile(&self, q: f64) -> Duration {
        quantile(&self.samples, q)
    }

    pub fn p50(&self) -> Duration {
        self.quantile(0.50)
    }

    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }

    pub fn per_second(&self) -> f64 {
        self.samples.len() as f64 / self.window.as_secs_f64().max(f64::EPSILON)
    }

    /// CPU time per cycle, in µs: (this process, the nodes together).
    pub fn cpu_per_cycle(&self) -> (f64, f64) {
        let cycles = self.all_cycles.max(1) as f64;
        (micros(self.client_cpu) / cycles, micros(self.server_cpu) / cycles)
    }

    /// Per cycle, over all nodes: (socket reads, commands).
    pub fn server_work_per_cycle(&self) -> (f64, f64) {
        let cycles = self.all_cycles.max(1) as f64;
        (
            self.server_reads as f64 / cycles,
            self.server_commands as f64 / cycles,
        )
    }
}

/// What a measurement runs: how many tasks, and which node processes' CPU to count.
#[derive(Clone, Copy)]
pub struct Setup<'a> {
    pub tasks: usize,
    pub server_pids: &'a [u32],
    /// One plain connection per node, for its `INFO stats` (none for a
    /// server that has no such counters).
    pub probes: &'a [MultiplexedConnection],
}

/// Runs `cycle` in a loop from `setup.tasks` tasks, each on its own key, for
/// `WARM_UP` unrecorded and then `MEASURED` recorded.
pub async fn measure<F, Fut>(setup: Setup<'_>, cycle: F) -> Measurement
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
pub struct Comparison {
    pub nodes: usize,
    pub floor: Measurement,
    pub fenced_floor: Measurement,
    pub ours: Measurement,
}

/// The floors and fencelock on `nodes` with `tasks` tasks each, alternating
/// rounds so that background load hits all alike.
pub async fn compare(nodes: &[RedisNode], tasks: usize) -> Comparison {
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

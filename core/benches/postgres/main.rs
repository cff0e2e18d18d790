//! PostgreSQL cycle benchmark: fencelock on a PostgreSQL node beside two
//! floors on the same server, measured in the same run, with 1 and 32
//! concurrent tasks.
//!
//! - FLOOR: the same statements through the same driver. The protocol's
//!   ACQUIRE and RELEASE, called straight through tokio-postgres as `SELECT
//!   fencelock.script(…)` (prepared once) with the arguments the client
//!   sends. The gap from
//!   it to fencelock is what our client adds (issue 19's target: fencelock
//!   at ≥ 0.85× its throughput).
//! - BARE SQL: what a hand-written lease lock costs at the least. One
//!   statement takes the lease and bumps a fencing counter (`INSERT … ON
//!   CONFLICT … WHERE expired` with the counter in a CTE), one deletes it if
//!   the token matches; both prepared once. Plain SQL, no functions, no queue: the gap from it to
//!   the floor is what the PL/pgSQL port of the protocol costs the server.
//!
//! - UNNAMED: fencelock as behind a declared transaction pooler
//!   (`fencelock_pooler=transaction`): every call an unnamed statement.
//!
//! Each runs acquire+release cycles from its tasks on distinct keys over one
//! session (as fencelock's one session per node), in alternating rounds so
//! that background load hits all alike. Beside each row, the CPU time this
//! process and the server's processes spent per cycle.
//!
//! Run it with `cargo bench -p fencelock --bench postgres` (about a minute
//! after the build). Results are in docs/performance.md.

#[allow(dead_code)]
#[path = "../cycle/proc.rs"]
mod proc;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fencelock::{Client, LockOptions};
use fencelock_harness::PostgresNode;
use tokio_postgres::NoTls;

use proc::{cores, cpu_time, load_average};

/// Concurrent tasks of each measurement, each cycling on its own key.
const CONCURRENCY: [usize; 2] = [1, 32];
/// fencelock's throughput against the floor's, at least (issue 19).
const TARGET: f64 = 0.85;
/// Rounds of each side, alternating.
const ROUNDS: usize = 3;
const WARM_UP: Duration = Duration::from_millis(300);
const MEASURED: Duration = Duration::from_millis(1500);
/// Long enough that no renewal happens within a cycle.
const TTL: Duration = Duration::from_secs(10);

type CycleResult = Result<(), String>;

#[tokio::main]
async fn main() {
    println!("fencelock PostgreSQL cycle benchmark");
    println!(
        "cores: {}, load average at the start: {}",
        cores(),
        load_average()
    );
    let node = PostgresNode::start();
    let postmaster = node.pid().expect("the server runs");
    let client = Client::builder()
        .node(node.url())
        .build()
        .await
        .expect("a client of the PostgreSQL node");
    client.migrate().await.expect("install the schema");
    // As behind a declared transaction pooler: every call an unnamed statement.
    let pooled = Client::builder()
        .node(format!("{}?fencelock_pooler=transaction", node.url()))
        .build()
        .await
        .expect("a client with unnamed statements");
    let bare = Arc::new(BareSql::connect(&node.url()).await);
    let scripts = Arc::new(Scripts::connect(&node.url()).await);

    for tasks in CONCURRENCY {
        let mut rows = [
            ("floor", Measurement::default()),
            ("fencelock", Measurement::default()),
            ("bare SQL", Measurement::default()),
            ("unnamed", Measurement::default()),
        ];
        for round in 0..ROUNDS {
            let side = |name: &'static str| format!("{name}:{tasks}:{round}");
            let scripts = scripts.clone();
            rows[0].1.merge(
                measure(postmaster, tasks, side("floor"), move |key, seq| {
                    let scripts = scripts.clone();
                    async move { scripts.cycle(&key, seq).await }
                })
                .await,
            );
            let client = client.clone();
            rows[1].1.merge(
                measure(postmaster, tasks, side("ours"), move |key, _| {
                    let client = client.clone();
                    async move {
                        let lock = client
                            .acquire(&key, LockOptions::new(TTL).wait(Duration::ZERO))
                            .await
                            .map_err(|e| e.to_string())?;
                        lock.release().await.map_err(|e| e.to_string())
                    }
                })
                .await,
            );
            let pooled = pooled.clone();
            rows[3].1.merge(
                measure(postmaster, tasks, side("unnamed"), move |key, _| {
                    let client = pooled.clone();
                    async move {
                        let lock = client
                            .acquire(&key, LockOptions::new(TTL).wait(Duration::ZERO))
                            .await
                            .map_err(|e| e.to_string())?;
                        lock.release().await.map_err(|e| e.to_string())
                    }
                })
                .await,
            );
            let bare = bare.clone();
            rows[2].1.merge(
                measure(postmaster, tasks, side("bare"), move |key, seq| {
                    let bare = bare.clone();
                    async move { bare.cycle(&key, seq).await }
                })
                .await,
            );
        }
        print_rows(tasks, &mut rows);
    }
    println!("load average at the end: {}", load_average());
}

fn print_rows(tasks: usize, rows: &mut [(&str, Measurement)]) {
    println!(
        "\nAcquire+release cycle, {tasks} concurrent task(s) on distinct keys, one session each \
         ({ROUNDS} alternating rounds of {}ms warm-up + {}ms measured)",
        WARM_UP.as_millis(),
        MEASURED.as_millis()
    );
    println!(
        "   {:<10} {:>8} {:>8} {:>8} {:>10} {:>7} {:>18} {:>18}",
        "client",
        "cycles",
        "p50 µs",
        "p99 µs",
        "cycles/s",
        "errors",
        "client CPU µs/cyc",
        "server CPU µs/cyc"
    );
    for (name, m) in rows.iter_mut() {
        m.samples.sort_unstable();
        let (client_cpu, server_cpu) = m.cpu_per_cycle();
        println!(
            "   {:<10} {:>8} {:>8} {:>8} {:>10.0} {:>7} {:>18.1} {:>18.1}",
            name,
            m.samples.len(),
            m.quantile(0.5).as_micros(),
            m.quantile(0.99).as_micros(),
            m.per_second(),
            m.errors,
            client_cpu,
            server_cpu
        );
        if let Some(error) = &m.first_error {
            println!("      first error: {error}");
        }
    }
    let (floor, ours, bare, unnamed) = (&rows[0].1, &rows[1].1, &rows[2].1, &rows[3].1);
    let throughput = ours.per_second() / floor.per_second().max(f64::EPSILON);
    let verdict = if throughput >= TARGET { "PASS" } else { "MISS" };
    println!("\n   ratio                          value   target  result");
    println!("   fencelock / floor, throughput  {throughput:.2}×  ≥ {TARGET:.2}×  {verdict}");
    println!(
        "   fencelock / floor, p50         {:.2}×",
        ours.quantile(0.5).as_secs_f64() / floor.quantile(0.5).as_secs_f64().max(f64::EPSILON)
    );
    println!(
        "   unnamed / fencelock, throughput {:.2}×   (fencelock_pooler=transaction: no prepared statement)",
        unnamed.per_second() / ours.per_second().max(f64::EPSILON)
    );
    println!(
        "   floor / bare SQL, throughput   {:.2}×   (what the protocol's PL/pgSQL costs the server)",
        floor.per_second() / bare.per_second().max(f64::EPSILON)
    );
}

/// Cycle latencies and CPU time of one side.
#[derive(Default)]
struct Measurement {
    samples: Vec<Duration>,
    window: Duration,
    errors: u64,
    first_error: Option<String>,
    all_cycles: u64,
    client_cpu: Duration,
    server_cpu: Duration,
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
    }

    fn quantile(&self, q: f64) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        let rank = (q * self.samples.len() as f64).ceil() as usize;
        self.samples[rank.clamp(1, self.samples.len()) - 1]
    }

    fn per_second(&self) -> f64 {
        self.samples.len() as f64 / self.window.as_secs_f64().max(f64::EPSILON)
    }

    fn cpu_per_cycle(&self) -> (f64, f64) {
        let cycles = self.all_cycles.max(1) as f64;
        let micros = |d: Duration| d.as_secs_f64() * 1e6;
        (micros(self.client_cpu) / cycles, micros(self.server_cpu) / cycles)
    }
}

/// Runs `cycle` from `tasks` tasks, each on its own key, for `WARM_UP`
/// unrecorded and then `MEASURED` recorded.
async fn measure<F, Fut>(postmaster: u32, tasks: usize, side: String, cycle: F) -> Measurement
where
    F: Fn(Arc<str>, u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = CycleResult> + Send + 'static,
{
    let (client_cpu, server_cpu) = (cpu_time("self"), server_cpu_time(postmaster));
    let record_from = Instant::now() + WARM_UP;
    let stop_at = record_from + MEASURED;
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let key: Arc<str> = format!("bench:{side}:{task}").into();
            let cycle = cycle.clone();
            tokio::spawn(async move {
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
            })
        })
        .collect();
    let mut total = Measurement::default();
    for handle in handles {
        total.merge(handle.await.expect("a benchmark task panicked"));
    }
    total.window = record_from.elapsed();
    total.client_cpu = cpu_time("self").saturating_sub(client_cpu);
    total.server_cpu = server_cpu_time(postmaster).saturating_sub(server_cpu);
    total
}

/// CPU time of the postmaster and its children (the backends, which live
/// as long as their sessions, so none exits mid-measurement).
fn server_cpu_time(postmaster: u32) -> Duration {
    let children: Duration = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(postmaster))
        .map(|pid| cpu_time(&pid.to_string()))
        .sum();
    children + cpu_time(&postmaster.to_string())
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

async fn session(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("a floor's session");
    tokio::spawn(connection);
    client
}

/// The least a lease lock with a fencing counter takes in plain SQL, with
/// statements prepared once.
struct BareSql {
    db: tokio_postgres::Client,
    acquire: tokio_postgres::Statement,
    release: tokio_postgres::Statement,
}

impl BareSql {
    async fn connect(url: &str) -> BareSql {
        let db = session(url).await;
        db.batch_execute(
            "CREATE TABLE IF NOT EXISTS bench_leases (key text PRIMARY KEY, token text NOT NULL, \
                 expires_at timestamptz NOT NULL);
             CREATE TABLE IF NOT EXISTS bench_counters (key text PRIMARY KEY, n bigint NOT NULL);",
        )
        .await
        .expect("the bare floor's tables");
        let acquire = db
            .prepare(
                "WITH fence AS (INSERT INTO bench_counters VALUES ($1, 1) ON CONFLICT (key) \
                     DO UPDATE SET n = bench_counters.n + 1 RETURNING n) \
                 INSERT INTO bench_leases VALUES ($1, $2, clock_timestamp() + $3 * interval '1 ms') \
                 ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token, expires_at = EXCLUDED.expires_at \
                     WHERE bench_leases.expires_at <= clock_timestamp() \
                 RETURNING (SELECT n FROM fence)",
            )
            .await
            .expect("prepare the bare acquire");
        let release = db
            .prepare("DELETE FROM bench_leases WHERE key = $1 AND token = $2")
            .await
            .expect("prepare the bare release");
        BareSql { db, acquire, release }
    }

    async fn cycle(&self, key: &str, seq: u64) -> CycleResult {
        let token = format!("{seq:032x}");
        let ttl_ms = TTL.as_millis() as f64;
        let granted = self
            .db
            .query_opt(&self.acquire, &[&key, &token, &ttl_ms])
            .await
            .map_err(|e| e.to_string())?;
        if granted.is_none() {
            return Err("the bare floor's lease was refused".to_owned());
        }
        let released = self
            .db
            .execute(&self.release, &[&key, &token])
            .await
            .map_err(|e| e.to_string())?;
        if released != 1 {
            return Err("the bare floor's release found no lease".to_owned());
        }
        Ok(())
    }
}

/// The protocol's scripts called directly, with the client's arguments,
/// through a statement prepared once (the least a call can cost).
struct Scripts {
    db: tokio_postgres::Client,
    call: tokio_postgres::Statement,
}

impl Scripts {
    async fn connect(url: &str) -> Scripts {
        let db = session(url).await;
        let call = db
            .prepare("SELECT fencelock.script($1, $2, $3)")
            .await
            .expect("prepare the script call");
        Scripts { db, call }
    }

    async fn call(
        &self,
        script: &str,
        keys: &[String],
        args: &[String],
    ) -> Result<serde_json::Value, String> {
        let row = self
            .db
            .query_one(&self.call, &[&script, &keys, &args])
            .await
            .map_err(|e| e.to_string())?;
        Ok(row.get::<_, Option<serde_json::Value>>(0).unwrap_or_default())
    }

    async fn cycle(&self, key: &str, seq: u64) -> CycleResult {
        let token = format!("{seq:032x}");
        let lock = format!("fenced-floor:{{{key}}}");
        let (fence, queue, leases) = (
            format!("{lock}:fence"),
            format!("{lock}:queue"),
            format!("{lock}:leases"),
        );
        // ACQUIRE as a try (no waiter): KEYS lock, fence, queue, leases.
        let acquired = self
            .call(
                "ACQUIRE",
                &[lock.clone(), fence, queue.clone(), leases.clone()],
                &[
                    token.clone(),
                    TTL.as_millis().to_string(),
                    String::new(),
                    "0".into(),
                    "1000".into(),
                    "0".into(),
                ],
            )
            .await?;
        if acquired.as_i64().is_none_or(|n| n < 1) {
            return Err(format!("ACQUIRE replied {acquired}"));
        }
        // RELEASE with a hand-off, as a holder's: KEYS lock, queue, leases.
        let released = self
            .call(
                "RELEASE",
                &[lock, queue, leases],
                &[token, "200".into(), "1".into()],
            )
            .await?;
        if released.as_i64() != Some(1) {
            return Err(format!("RELEASE replied {released}"));
        }
        Ok(())
    }
}

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

// The cycle bench's measuring, shared as it is: `measure` runs a cycle from
// many tasks and times it (and its floor and node statistics, which it
// needs, come along unused).
#[allow(dead_code)]
#[path = "../cycle/floor.rs"]
mod floor;
#[allow(dead_code)]
#[path = "../cycle/measure.rs"]
mod measure;
#[allow(dead_code)]
#[path = "../cycle/proc.rs"]
mod proc;
#[allow(dead_code)]
#[path = "../cycle/server_stats.rs"]
mod server_stats;
#[allow(dead_code)]
#[path = "../cycle/util.rs"]
mod util;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fencelock::{Client, LockOptions};
use fencelock_harness::PostgresNode;
use tokio_postgres::NoTls;

use measure::{CycleResult, MEASURED, Measurement, Setup, WARM_UP, measure};
use proc::{cores, load_average};

/// Concurrent tasks of each measurement, each cycling on its own key.
const CONCURRENCY: [usize; 2] = [1, 32];
/// fencelock's throughput against the floor's, at least (issue 19).
const TARGET: f64 = 0.85;
/// Rounds of each side, alternating.
const ROUNDS: usize = 3;
/// Long enough that no renewal happens within a cycle.
const TTL: Duration = Duration::from_secs(10);

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
    // Every session is open by now, and each backend lives as long as its session.
    let server_pids = server_pids(postmaster);

    for tasks in CONCURRENCY {
        let mut rows = [
            ("floor", Measurement::default()),
            ("fencelock", Measurement::default()),
            ("bare SQL", Measurement::default()),
            ("unnamed", Measurement::default()),
        ];
        for _ in 0..ROUNDS {
            let setup = Setup {
                tasks,
                server_pids: &server_pids,
                probes: &[],
            };
            let scripts = scripts.clone();
            rows[0].1.merge(
                measure(setup, move |key, seq| {
                    let scripts = scripts.clone();
                    async move { scripts.cycle(&key, seq).await }
                })
                .await,
            );
            rows[1].1.merge(measure(setup, ours(&client)).await);
            rows[3].1.merge(measure(setup, ours(&pooled)).await);
            let bare = bare.clone();
            rows[2].1.merge(
                measure(setup, move |key, seq| {
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

/// fencelock's cycle: `acquire` (no wait) then `release`, through `client`.
fn ours(client: &Client) -> impl Fn(Arc<str>, u64) -> BoxedCycle + Clone + Send + 'static {
    let client = client.clone();
    move |key, _| {
        let client = client.clone();
        Box::pin(async move {
            let lock = client
                .acquire(&key, LockOptions::new(TTL).wait(Duration::ZERO))
                .await
                .map_err(|e| e.to_string())?;
            lock.release().await.map_err(|e| e.to_string())
        })
    }
}

type BoxedCycle = std::pin::Pin<Box<dyn Future<Output = CycleResult> + Send>>;

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
        m.sort();
        let (client_cpu, server_cpu) = m.cpu_per_cycle();
        println!(
            "   {:<10} {:>8} {:>8} {:>8} {:>10.0} {:>7} {:>18.1} {:>18.1}",
            name,
            m.samples.len(),
            m.p50().as_micros(),
            m.p99().as_micros(),
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
        ours.p50().as_secs_f64() / floor.p50().as_secs_f64().max(f64::EPSILON)
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

/// The postmaster and its children, the backends (whose CPU time the
/// measurements count).
fn server_pids(postmaster: u32) -> Vec<u32> {
    let children = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(postmaster));
    std::iter::once(postmaster).chain(children).collect()
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

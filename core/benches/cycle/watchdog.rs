//! Section 3: the watchdog at scale.

use std::time::{Duration, Instant};

use fencelock::{Client, Lock, LockOptions};
use fencelock_harness::RedisNode;
use futures_util::StreamExt;

use crate::proc::rss_kb;
use crate::server_stats::{Counters, ServerStats, connect_probes};
use crate::target::verdict;
use crate::util::mb;

/// Locks held at once by the watchdog section, their ttl, and for how long.
const HELD_LOCKS: usize = 10_000;
const HOLD_TTL: Duration = Duration::from_secs(3);
const HOLD_FOR: Duration = Duration::from_secs(6);
/// Acquisitions or releases in flight while taking or freeing the held locks.
const BULK_CONCURRENCY: usize = 64;

pub struct WatchdogReport {
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

pub async fn watchdog_at_scale(node: &RedisNode) -> WatchdogReport {
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

pub fn print_watchdog(r: &WatchdogReport) {
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

fn show_counters(counters: &Counters) -> String {
    if counters.is_empty() {
        return "none".to_owned();
    }
    let shown: Vec<String> = counters.iter().map(|(name, n)| format!("{name} {n}")).collect();
    shown.join(", ")
}

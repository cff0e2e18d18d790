//! Interop worker (Rust front): `ITERATIONS` times, take the lock, do a
//! non-atomic read-modify-write of the counter file, log the critical section.
//! `FENCELOCK_INTEROP_TAKE` (see worker.py) says what it takes instead:
//! `elect` campaigns (announcing `rust`, also `FENCELOCK_INTEROP_ELECT=1`) and
//! logs its epoch, `permits:K` takes a permit (logged as a fifth field, the
//! counter untouched), `rw` reads (even iterations, `r`) and writes (odd, `w`).
//! `FENCELOCK_INTEROP_NODE_TIMEOUT_MS`, if set (not empty), is the per-node timeout
//! in milliseconds (anything else fails the worker).
//!
//! `interop-worker NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE` (NODES comma-separated)

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fencelock::{CampaignOptions, Client, Lock, LockOptions, Result};

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos()
}

/// What iteration `i` takes in `mode`: the lock, the leadership (a lock whose
/// token is the epoch), a permit or a read or write grant; whether it writes
/// the counter; and what it logs after the times.
async fn take(client: &Client, resource: &str, mode: &str, i: u32) -> Result<(Lock, bool, String)> {
    let (ttl, wait) = (Duration::from_secs(10), Duration::from_secs(120));
    let options = LockOptions::new(ttl).wait(wait);
    if mode == "elect" {
        let options = CampaignOptions::new(ttl).wait(wait).value("rust");
        return Ok((
            client.campaign(resource, options).await?.into_lock(),
            true,
            String::new(),
        ));
    }
    if let Some(permits) = mode.strip_prefix("permits:") {
        let permits = permits.parse().unwrap_or(1);
        let permit = client.semaphore(resource, permits)?.acquire(options).await?;
        let extra = format!(" {}", permit.permit().unwrap_or_default());
        return Ok((permit, false, extra));
    }
    if mode == "rw" {
        let rw = client.rw_lock(resource)?;
        return Ok(match i % 2 {
            1 => (rw.write(options).await?, true, " w".to_owned()),
            _ => (rw.read(options).await?, false, " r".to_owned()),
        });
    }
    Ok((client.acquire(resource, options).await?, true, String::new()))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, nodes, resource, iterations, counter, log] = args.as_slice() else {
        return Err("usage: interop-worker NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE".into());
    };
    let mut builder = Client::builder().nodes(nodes.split(','));
    if let Some(ms) = std::env::var("FENCELOCK_INTEROP_NODE_TIMEOUT_MS")
        .ok()
        .filter(|ms| !ms.is_empty())
    {
        let ms = ms
            .parse()
            .map_err(|e| format!("FENCELOCK_INTEROP_NODE_TIMEOUT_MS={ms:?}: {e}"))?;
        builder = builder.node_timeout(Duration::from_millis(ms));
    }
    let client = builder.build().await?;
    let mode = match std::env::var("FENCELOCK_INTEROP_ELECT").is_ok_and(|v| v == "1") {
        true => "elect".to_owned(),
        false => std::env::var("FENCELOCK_INTEROP_TAKE").unwrap_or_else(|_| "lock".to_owned()),
    };
    for i in 0..iterations.parse::<u32>()? {
        let (lock, writes, extra) = take(&client, resource, &mode, i).await?;
        let start = now_ns();
        let value: u64 = std::fs::read_to_string(counter)?.trim().parse().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(3)).await; // widen the window a lost update needs
        if writes {
            std::fs::write(counter, format!("{}\n", value + 1))?;
        }
        let line = format!("rust {} {start} {}{extra}\n", lock.fencing_token(), now_ns());
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)?
            .write_all(line.as_bytes())?;
        lock.release().await?;
    }
    Ok(())
}

//! Interop worker (Rust front): `ITERATIONS` times, take the lock, do a
//! non-atomic read-modify-write of the counter file, log the critical section.
//! With `FENCELOCK_INTEROP_ELECT=1` it campaigns instead (announcing `rust`)
//! and logs its epoch.
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

/// The lock, or with `elect` the leadership (a lock whose token is the epoch).
async fn take(client: &Client, resource: &str, elect: bool) -> Result<Lock> {
    let (ttl, wait) = (Duration::from_secs(10), Duration::from_secs(120));
    if elect {
        let options = CampaignOptions::new(ttl).wait(wait).value("rust");
        return Ok(client.campaign(resource, options).await?.into_lock());
    }
    client.acquire(resource, LockOptions::new(ttl).wait(wait)).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, nodes, resource, iterations, counter, log] = args.as_slice() else {
        return Err("usage: interop-worker NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE".into());
    };
    let client = Client::builder().nodes(nodes.split(',')).build().await?;
    let elect = std::env::var("FENCELOCK_INTEROP_ELECT").is_ok_and(|v| v == "1");
    for _ in 0..iterations.parse::<u32>()? {
        let lock = take(&client, resource, elect).await?;
        let start = now_ns();
        let value: u64 = std::fs::read_to_string(counter)?.trim().parse().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(3)).await; // widen the window a lost update needs
        std::fs::write(counter, format!("{}\n", value + 1))?;
        let line = format!("rust {} {start} {}\n", lock.fencing_token(), now_ns());
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)?
            .write_all(line.as_bytes())?;
        lock.release().await?;
    }
    Ok(())
}

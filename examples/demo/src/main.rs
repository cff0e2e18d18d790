//! The README's demo: what goes wrong without a lock, and what fencelock
//! guarantees with one. Starts its own redis-server nodes on free loopback
//! ports and stops them (by PID) when it ends, also on Ctrl-C.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions};
use fencelock_harness::{NodeOptions, RedisNode};
use redis::AsyncCommands;

const STOCK: u32 = 100;
const BUYERS: usize = 16;

type DemoResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::main]
async fn main() {
    println!("fencelock demo: starting 5 local redis-server nodes (free loopback ports)…");
    let nodes = Arc::new(RedisNode::start_many(5, &NodeOptions::default()));
    let ports: Vec<String> = nodes.iter().map(|n| n.port().to_string()).collect();
    println!("  nodes up on 127.0.0.1 ports {}\n", ports.join(", "));
    let outcome = tokio::select! {
        result = run(nodes.clone()) => result.map(|()| 0),
        _ = tokio::signal::ctrl_c() => {
            println!("\ninterrupted; stopping the nodes");
            Ok(130)
        }
    };
    // Stop the nodes before exiting: process::exit skips destructors.
    drop(nodes);
    match outcome {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("demo failed: {err}");
            std::process::exit(1);
        }
    }
}

async fn run(nodes: Arc<Vec<RedisNode>>) -> DemoResult {
    let client = Client::builder()
        .nodes(nodes.iter().map(RedisNode::url))
        .node_timeout(Duration::from_millis(50))
        .build()
        .await?;
    let data = redis::Client::open(nodes[0].url())?;
    oversell_without_lock(&data).await?;
    exact_with_lock(&client, &data).await?;
    paused_writer_is_fenced(&client).await?;
    survives_two_dead_nodes(&client, &nodes).await?;
    every_language_takes_the_same_lock(&nodes)?;
    println!("done: every node stopped by its PID.");
    Ok(())
}

/// One buyer: read the stock, think, write it back minus one. Not atomic.
async fn buy_one(data: &redis::Client) -> redis::RedisResult<bool> {
    let mut conn = data.get_multiplexed_async_connection().await?;
    let stock: u32 = conn.get("demo:stock").await?;
    if stock == 0 {
        return Ok(false);
    }
    tokio::time::sleep(Duration::from_micros(300)).await; // e.g. charge the card
    let () = conn.set("demo:stock", stock - 1).await?;
    Ok(true)
}

async fn reset_stock(data: &redis::Client) -> redis::RedisResult<()> {
    let mut conn = data.get_multiplexed_async_connection().await?;
    conn.set("demo:stock", STOCK).await
}

async fn oversell_without_lock(data: &redis::Client) -> DemoResult {
    println!("1. {BUYERS} buyers, {STOCK} items, no lock");
    reset_stock(data).await?;
    let sold = Arc::new(AtomicU32::new(0));
    let buyers: Vec<_> = (0..BUYERS)
        .map(|_| {
            let (data, sold) = (data.clone(), sold.clone());
            tokio::spawn(async move {
                while buy_one(&data).await.unwrap_or(false) {
                    sold.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for buyer in buyers {
        buyer.await?;
    }
    let sold = sold.load(Ordering::Relaxed);
    println!(
        "   sold {sold} items out of {STOCK}: oversold by {}\n",
        sold.saturating_sub(STOCK)
    );
    Ok(())
}

async fn exact_with_lock(client: &Client, data: &redis::Client) -> DemoResult {
    println!("2. the same buyers, each purchase under a Redlock lock on 5 nodes");
    reset_stock(data).await?;
    let sold = Arc::new(AtomicU32::new(0));
    let buyers: Vec<_> = (0..BUYERS)
        .map(|_| {
            let (client, data, sold) = (client.clone(), data.clone(), sold.clone());
            tokio::spawn(async move {
                loop {
                    let options = LockOptions::new(Duration::from_secs(5)).wait(Duration::from_secs(30));
                    let lock = client.acquire("demo:stock", options).await?;
                    let bought = buy_one(&data).await.unwrap_or(false);
                    lock.release().await?;
                    if !bought {
                        return Ok::<_, fencelock::Error>(());
                    }
                    sold.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for buyer in buyers {
        buyer.await??;
    }
    println!(
        "   sold {} items out of {STOCK}: exact\n",
        sold.load(Ordering::Relaxed)
    );
    Ok(())
}

async fn paused_writer_is_fenced(client: &Client) -> DemoResult {
    println!("3. a holder pauses past its lease (think GC pause), then writes");
    let short = LockOptions::new(Duration::from_millis(200)).auto_renew(false);
    let a = client.acquire("demo:report", short).await?;
    println!("   A holds the lock with fencing token {}", a.fencing_token());
    println!("   A pauses 400 ms; its lease expires");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let b = client
        .acquire("demo:report", LockOptions::new(Duration::from_secs(5)))
        .await?;
    client
        .fenced_set("demo:report-data", "written by B", b.fence())
        .await?;
    println!("   B takes the lock with token {} and writes", b.fencing_token());
    match client
        .fenced_set("demo:report-data", "written by A", a.fence())
        .await
    {
        Err(err) if err.kind() == ErrorKind::StaleToken => {
            println!(
                "   A wakes up and writes with token {}: rejected (stale token)",
                a.fencing_token()
            );
        }
        other => return Err(format!("A's late write was not rejected: {other:?}").into()),
    }
    let stored = client.fenced_get("demo:report-data").await?;
    println!(
        "   the data still says {:?}\n",
        stored.map(|(value, _)| value).unwrap_or_default()
    );
    b.release().await?;
    Ok(())
}

async fn survives_two_dead_nodes(client: &Client, nodes: &[RedisNode]) -> DemoResult {
    println!("4. node failures (quorum is 3 of 5)");
    nodes[3].kill();
    nodes[4].kill();
    let lock = client
        .acquire("demo:failover", LockOptions::new(Duration::from_secs(5)))
        .await?;
    println!(
        "   2 of 5 nodes killed: acquired anyway (token {}, valid {} ms)",
        lock.fencing_token(),
        lock.remaining().as_millis()
    );
    lock.release().await?;
    nodes[2].kill();
    match client
        .try_acquire("demo:failover", LockOptions::new(Duration::from_secs(5)))
        .await
    {
        Err(err) if err.kind() == ErrorKind::Unavailable => {
            println!("   3 of 5 nodes killed: refused, as it must be:\n     {err}\n");
        }
        other => return Err(format!("acquired without a majority: {other:?}").into()),
    }
    Ok(())
}

/// The last scene: Rust, C, Python, Node, .NET, the command line and an
/// independent redis-py client take the same lock in turn, and its fencing
/// token rises across them. tests/interop/interop.py runs each language's
/// worker; fronts that are not built yet are skipped with the command that
/// builds them.
fn every_language_takes_the_same_lock(nodes: &[RedisNode]) -> DemoResult {
    println!("5. one lock, every language (the nodes restarted)");
    for node in &nodes[2..] {
        node.restart();
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let urls: Vec<String> = nodes.iter().map(RedisNode::url).collect();
    let venv_python = root.join("target/python-venv/bin/python");
    let python = if venv_python.exists() {
        venv_python
    } else {
        "python3".into()
    };
    // The workers were built beside this program (scripts/demo.sh).
    let built = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(std::path::Path::to_path_buf))
        .ok_or("cannot find the directory of this program, where the workers are")?;
    let status = std::process::Command::new("python3")
        .arg(root.join("tests/interop/interop.py"))
        .args(["--in-turn", &urls.join(",")])
        .env("FENCELOCK_PROFILE", built)
        .env("FENCELOCK_PYTHON", python)
        .status()
        .map_err(|e| format!("cannot run python3 for the last scene: {e}"))?;
    if !status.success() {
        return Err("a language failed to take the lock in turn".into());
    }
    println!();
    Ok(())
}

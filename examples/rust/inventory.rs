//! Inventory decrement guarded by a fencelock lock, with the write fenced by
//! the lock's token so a stalled former holder can never overwrite newer stock.
//!
//! `FENCELOCK_NODES=redis://127.0.0.1:6379 cargo run -p fencelock --example inventory -- SKU [DECREMENTS]`

use std::time::Duration;

use fencelock::{Client, LockOptions};

#[tokio::main]
async fn main() -> fencelock::Result<()> {
    let nodes = std::env::var("FENCELOCK_NODES").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let mut args = std::env::args().skip(1);
    let sku = args.next().unwrap_or_else(|| "sku-42".to_owned());
    let decrements: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(1);

    let client = Client::builder().nodes(nodes.split(',')).build().await?;
    let stock_key = format!("stock:{sku}");
    for _ in 0..decrements {
        let options = LockOptions::new(Duration::from_secs(5)).wait(Duration::from_secs(30));
        let lock = client.acquire(&format!("inventory:{sku}"), options).await?;
        let stock: i64 = match client.fenced_get(&stock_key).await? {
            Some((value, _)) => value.parse().unwrap_or(0),
            None => 100,
        };
        // Refused with ErrorKind::StaleToken if a newer holder already wrote.
        client
            .fenced_set(&stock_key, &(stock - 1).to_string(), lock.fence())
            .await?;
        lock.release().await?;
    }
    if let Some((stock, token)) = client.fenced_get(&stock_key).await? {
        println!("stock of {sku}: {stock} (last written with fencing token {token})");
    }
    Ok(())
}

//! PostgreSQL as a node (issue 19): the same locks, tokens, waits and
//! signals over a real PostgreSQL server.

use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions, LossReason};
use fencelock_harness::{FaultProxy, PgBouncer, PostgresNode};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

async fn client(node: &PostgresNode) -> Client {
    Client::builder()
        .node(node.url())
        .node_timeout(ms(2000))
        .build()
        .await
        .expect("a client of a PostgreSQL node builds")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_over_postgres_acquires_refuses_extends_and_releases() {
    let node = PostgresNode::start();
    let client = client(&node).await;
    let lock = client.acquire("pg:1", LockOptions::new(ms(5000))).await.unwrap();
    assert!(
        client
            .try_acquire("pg:1", LockOptions::new(ms(5000)))
            .await
            .unwrap()
            .is_none(),
        "held: a second attempt is refused"
    );
    lock.extend(ms(8000)).await.unwrap();
    let ttl = node.sql("SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::int FROM fencelock.keys WHERE key = 'fencelock:{pg:1}'");
    let ttl: i64 = ttl.parse().unwrap();
    assert!(
        ttl > 5000 && ttl <= 8000,
        "the lease row's expiry follows extend: {ttl} ms"
    );
    let first = lock.fencing_token();
    lock.release().await.unwrap();
    let again = client.acquire("pg:1", LockOptions::new(ms(5000))).await.unwrap();
    assert!(again.fencing_token() > first, "tokens rise");
    again.release().await.unwrap();
    assert_eq!(
        node.sql("SELECT count(*) FROM fencelock.keys WHERE key = 'fencelock:{pg:1}'"),
        "0"
    );
    assert_eq!(
        node.sql("SELECT value FROM fencelock.keys WHERE key = 'fencelock:{pg:1}:fence'"),
        again.fencing_token().to_string()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_notify_when_the_lock_is_released() {
    let node = PostgresNode::start();
    let holder = client(&node).await;
    let waiter = client(&node).await;
    let lock = holder
        .acquire("pg:wait", LockOptions::new(ms(30_000)))
        .await
        .unwrap();
    let waiting = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let lock = waiter
            .acquire("pg:wait", LockOptions::new(ms(30_000)).wait(ms(20_000)))
            .await
            .unwrap();
        (lock, started)
    });
    // The waiter's client listens: its session holds the advisory lock
    // that makes a release's NOTIFY count it (docs/postgres-store.md).
    let listening = || node.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while listening() == "0" {
        assert!(std::time::Instant::now() < deadline, "the waiter never listened");
        tokio::time::sleep(ms(20)).await;
    }
    tokio::time::sleep(ms(500)).await;
    let released = std::time::Instant::now();
    lock.release().await.unwrap();
    let (next, _) = waiting.await.unwrap();
    let woken_after = released.elapsed();
    assert!(next.fencing_token() > lock.fencing_token());
    // Push, not the 500 ms poll: the hand-off reaches the waiter at once.
    assert!(
        woken_after < Duration::from_millis(400),
        "woken {woken_after:?} after the release"
    );
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_lease_row_is_a_lost_lock() {
    let node = PostgresNode::start();
    let client = client(&node).await;
    let lock = client
        .acquire("pg:lost", LockOptions::new(ms(1_000)))
        .await
        .unwrap();
    node.sql("DELETE FROM fencelock.keys WHERE key = 'fencelock:{pg:lost}'");
    let reason = tokio::time::timeout(ms(3000), lock.lost())
        .await
        .expect("the loss is signalled");
    assert_eq!(reason, LossReason::Deleted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_go_to_a_table_and_refuse_a_stale_token() {
    let node = PostgresNode::start();
    let client = client(&node).await;
    let old = client
        .acquire("pg:data", LockOptions::new(ms(5000)))
        .await
        .unwrap();
    let old_fence = old.fence();
    old.release().await.unwrap();
    let new = client
        .acquire("pg:data", LockOptions::new(ms(5000)))
        .await
        .unwrap();
    client.fenced_set("data:pg", "new", new.fence()).await.unwrap();
    let stale = client.fenced_set("data:pg", "old", old_fence).await.unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::StaleToken, "{stale}");
    assert_eq!(
        client.fenced_get("data:pg").await.unwrap(),
        Some(("new".to_owned(), new.fencing_token()))
    );
    // PostgreSQL's text holds no NUL byte: refused before anything is
    // written, saying why, where Redis would have stored it.
    let nul = client
        .fenced_set("data:pg", "a\0b", new.fence())
        .await
        .unwrap_err();
    assert_eq!(nul.kind(), ErrorKind::InvalidArgument, "{nul}");
    assert!(nul.to_string().contains("NUL"), "{nul}");
    assert_eq!(
        client.fenced_get("data:pg").await.unwrap(),
        Some(("new".to_owned(), new.fencing_token()))
    );
    new.release().await.unwrap();
}

/// protocol.md §6, the fencing pattern for the user's own tables, run
/// verbatim on the PostgreSQL server that is also the lock's node: the
/// current holder writes (repeatedly), a former holder's stale token and a
/// second grant with an equal token but another holder id write nothing,
/// and new rows take the same guard through `INSERT … ON CONFLICT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_fencing_pattern_refuses_stale_writers_in_the_users_own_table() {
    let node = PostgresNode::start();
    let client = client(&node).await;
    let (db, connection) = tokio_postgres::connect(&node.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    db.batch_execute(
        "CREATE TABLE inventory (
             sku           text    PRIMARY KEY,
             stock         integer NOT NULL,
             fence         bigint  NOT NULL DEFAULT 0,
             fence_holder  bigint  NOT NULL DEFAULT 0
         );
         INSERT INTO inventory (sku, stock) VALUES ('sku-1', 100);",
    )
    .await
    .unwrap();
    let update = "UPDATE inventory SET stock = $1, fence = $2, fence_holder = $3 \
                  WHERE sku = $4 AND (fence < $2 OR (fence = $2 AND fence_holder = $3 AND $3 <> 0))";
    let upsert = "INSERT INTO inventory (sku, stock, fence, fence_holder) VALUES ($4, $1, $2, $3) \
                  ON CONFLICT (sku) DO UPDATE SET stock = EXCLUDED.stock, fence = EXCLUDED.fence, \
                  fence_holder = EXCLUDED.fence_holder \
                  WHERE inventory.fence < EXCLUDED.fence OR (inventory.fence = EXCLUDED.fence \
                  AND inventory.fence_holder = EXCLUDED.fence_holder AND EXCLUDED.fence_holder <> 0)";
    let write = |sql: &'static str, stock: i32, fence: fencelock::Fence, sku: &'static str| {
        let db = &db;
        async move {
            let (token, holder) = (fence.token as i64, fence.holder as i64);
            db.execute(sql, &[&stock, &token, &holder, &sku]).await.unwrap()
        }
    };

    let former = client.acquire("sku-1", LockOptions::new(ms(5000))).await.unwrap();
    let stale = former.fence();
    assert_eq!(write(update, 99, stale, "sku-1").await, 1, "the holder writes");
    former.release().await.unwrap();
    let current = client.acquire("sku-1", LockOptions::new(ms(5000))).await.unwrap();
    let fence = current.fence();
    assert_eq!(
        write(update, 98, fence, "sku-1").await,
        1,
        "the new holder writes"
    );
    assert_eq!(write(update, 97, fence, "sku-1").await, 1, "and writes again");
    assert_eq!(
        write(update, 1, stale, "sku-1").await,
        0,
        "the former holder is refused"
    );
    let twin = fencelock::Fence {
        token: fence.token,
        holder: fence.holder ^ 1,
    };
    assert_eq!(
        write(update, 2, twin, "sku-1").await,
        0,
        "an equal token from another grant is refused"
    );
    assert_eq!(
        write(update, 3, fencelock::Fence::bare(fence.token), "sku-1").await,
        0,
        "a bare equal token is refused"
    );
    assert_eq!(write(upsert, 50, fence, "sku-2").await, 1, "a new row");
    assert_eq!(write(upsert, 4, stale, "sku-2").await, 0, "a stale upsert");
    let rows = db
        .query("SELECT sku, stock, fence FROM inventory ORDER BY sku", &[])
        .await
        .unwrap();
    let rows: Vec<(String, i32, i64)> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
    assert_eq!(
        rows,
        [
            ("sku-1".to_owned(), 97, fence.token as i64),
            ("sku-2".to_owned(), 50, fence.token as i64)
        ]
    );
    current.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_beside_redis_or_two_postgres_is_a_configuration_error() {
    for nodes in [
        vec!["postgresql://u@127.0.0.1:1/db", "redis://127.0.0.1:2"],
        vec!["postgresql://u@127.0.0.1:1/db", "postgresql://u@127.0.0.1:2/db"],
    ] {
        let err = Client::builder().nodes(nodes.clone()).build().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{nodes:?}: {err}");
        assert!(err.to_string().contains("PostgreSQL"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_may_lose_commits_is_refused_when_durability_is_required() {
    // The harness runs PostgreSQL with fsync off (its tests restart servers on purpose).
    let node = PostgresNode::start();
    let err = Client::builder()
        .node(node.url())
        .require_aof(true)
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(err.to_string().contains("fsync"), "{err}");
    assert!(
        !err.to_string().contains("appendonly"),
        "Redis advice for a PostgreSQL node: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_works_through_pgbouncer_in_transaction_pooling_mode() {
    let node = PostgresNode::start();
    // Installed directly first: a migration is for the schema's owner.
    client(&node).await.migrate().await.unwrap();
    let Some(bouncer) = PgBouncer::start(&node) else {
        println!("SKIPPED: pgbouncer is not installed (apt-get install pgbouncer)");
        return;
    };
    let pooled = || async {
        Client::builder()
            .node(bouncer.url())
            .node_timeout(ms(2000))
            .build()
            .await
            .expect("a client through PgBouncer builds")
    };
    let (holder, waiter) = (pooled().await, pooled().await);
    let lock = holder
        .acquire("pg:pooled", LockOptions::new(ms(800)))
        .await
        .unwrap();
    assert!(
        waiter
            .try_acquire("pg:pooled", LockOptions::new(ms(800)))
            .await
            .unwrap()
            .is_none()
    );
    // Renewed through the pooler for several ttls.
    tokio::time::sleep(ms(2000)).await;
    assert!(lock.is_held(), "renewals through PgBouncer failed");
    lock.extend(ms(5000)).await.unwrap();
    let waiting = tokio::spawn(async move {
        waiter
            .acquire("pg:pooled", LockOptions::new(ms(5000)).wait(ms(10_000)))
            .await
    });
    tokio::time::sleep(ms(200)).await;
    lock.release().await.unwrap();
    // Wake-ups need a session, which a transaction pooler does not keep:
    // the waiter may learn of the release by its bounded retry instead.
    let next = waiting.await.unwrap().expect("the waiter gets the lock");
    assert!(next.fencing_token() > lock.fencing_token());
    next.release().await.unwrap();
}

/// Through a transaction pooler, `fencelock_listen` sends the LISTEN
/// sessions to the server's own address (here through a fault proxy, to
/// see them arrive): waiters are woken by NOTIFY again, not by their retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_pgbouncer_waiters_listen_at_the_servers_own_address() {
    let node = PostgresNode::start();
    client(&node).await.migrate().await.unwrap();
    let Some(bouncer) = PgBouncer::start(&node) else {
        println!("SKIPPED: pgbouncer is not installed (apt-get install pgbouncer)");
        return;
    };
    let direct = FaultProxy::start(node.port());
    let url = format!(
        "{}?fencelock_pooler=transaction&fencelock_listen=127.0.0.1:{}",
        bouncer.url(),
        direct.port()
    );
    let pooled = || async {
        Client::builder()
            .node(url.clone())
            .node_timeout(ms(2000))
            .build()
            .await
            .expect("a client through PgBouncer builds")
    };
    let (holder, waiter) = (pooled().await, pooled().await);
    let lock = holder
        .acquire("pg:pooled-listen", LockOptions::new(ms(30_000)))
        .await
        .unwrap();
    assert_eq!(direct.stats().accepted, 0, "requests went to the listen address");
    let waiting = tokio::spawn(async move {
        let lock = waiter
            .acquire("pg:pooled-listen", LockOptions::new(ms(5000)).wait(ms(20_000)))
            .await;
        (lock, std::time::Instant::now())
    });
    let listening = || node.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while direct.stats().accepted == 0 || listening() == "0" {
        assert!(
            std::time::Instant::now() < deadline,
            "the waiter never listened directly"
        );
        tokio::time::sleep(ms(20)).await;
    }
    tokio::time::sleep(ms(500)).await;
    let released = std::time::Instant::now();
    lock.release().await.unwrap();
    let (next, woken) = waiting.await.unwrap();
    let next = next.expect("the waiter gets the lock");
    let delay = woken.saturating_duration_since(released);
    assert!(next.fencing_token() > lock.fencing_token());
    assert!(delay < ms(400), "woken {delay:?} after the release");
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_postgres_are_listed_and_inspected_as_on_redis() {
    let node = PostgresNode::start();
    let client = client(&node).await;
    for resource in ["pgl:b", "pgl:a", "pgl:[x]", "pgm:c", "pgl:held"] {
        let lock = client
            .acquire(resource, LockOptions::new(ms(5000)))
            .await
            .unwrap();
        if resource != "pgl:held" {
            lock.release().await.unwrap();
        } else {
            std::mem::forget(lock);
        }
    }
    // Semaphores are not listed: only locks' counters.
    let permit = client
        .semaphore("pgl:sem", 2)
        .unwrap()
        .acquire(LockOptions::new(ms(5000)))
        .await
        .unwrap();
    assert_eq!(
        client.resources("pgl:*", 10).await.unwrap(),
        ["pgl:[x]", "pgl:a", "pgl:b", "pgl:held"]
    );
    // The glob's characters, in the pattern and in the names, are the glob's.
    assert_eq!(
        client.resources("pgl:[ab]", 10).await.unwrap(),
        ["pgl:a", "pgl:b"]
    );
    assert_eq!(client.resources(r"pgl:\[x]", 10).await.unwrap(), ["pgl:[x]"]);
    assert_eq!(client.resources("pg?:c", 10).await.unwrap(), ["pgm:c"]);
    assert_eq!(client.resources("*", 2).await.unwrap().len(), 2);
    // More locks than one SCAN page (1000).
    node.sql(
        "INSERT INTO fencelock.keys (key, kind, value) \
         SELECT 'fencelock:{pgp:' || i || '}:fence', 'string', '1' FROM generate_series(1, 1500) i",
    );
    assert_eq!(client.resources("pgp:*", 10_000).await.unwrap().len(), 1500);
    assert_eq!(client.resources("*", 10_000).await.unwrap().len(), 1505);

    let status = client.inspect("pgl:held").await.unwrap();
    assert_eq!(status.len(), 1);
    assert!(status[0].held, "{status:?}");
    assert!(status[0].fencing_counter >= 1, "{status:?}");
    permit.release().await.unwrap();
}

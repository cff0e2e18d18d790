//! A PostgreSQL node under faults (issue 19; reliability.md P06–P10):
//! restarts and crashes, backends killed with `pg_terminate_backend`, a
//! silent network, the server cancelling a statement, and a table lock that
//! outlasts the client's timeout. The lease's expiry is the server's
//! business; what the client reports is decided by its own monotonic clock.

use std::time::{Duration, Instant};

use fencelock::{Client, ErrorKind, LockOptions};
use fencelock_harness::{FaultProxy, Mode, PostgresNode};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

async fn client_of(url: String, node_timeout: Duration) -> Client {
    Client::builder()
        .node(url)
        .node_timeout(node_timeout)
        .build()
        .await
        .expect("a client of a PostgreSQL node builds")
}

/// Milliseconds until the lease row of `resource` expires, by the server's
/// clock; `None` without a row.
fn lease_left_ms(node: &PostgresNode, resource: &str) -> Option<i64> {
    let left = node.sql(&format!(
        "SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint \
         FROM fencelock.keys WHERE key = 'fencelock:{{{resource}}}'"
    ));
    (!left.is_empty()).then(|| left.parse().expect("a number of milliseconds"))
}

/// Ends every client session but the one asking, as an administrator would.
fn terminate_client_backends(node: &PostgresNode) -> usize {
    node.sql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
    )
    .parse()
    .expect("a count")
}

/// P06: a fast restart keeps the committed lease and counter rows, so a
/// lock held across it stays held (its renewals resume on a new session)
/// and the token sequence goes on from where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_outlives_a_server_restart_and_tokens_keep_rising() {
    let node = PostgresNode::start();
    let client = client_of(node.url(), ms(2000)).await;
    let ttl = ms(3000);
    let lock = client
        .acquire("pgf:restart", LockOptions::new(ttl))
        .await
        .unwrap();
    let renewals_before = lock.renewals();
    tokio::task::block_in_place(|| node.restart());
    // Two renewal periods after the restart: renewed on a new session.
    let deadline = Instant::now() + ttl * 2;
    while lock.renewals() < renewals_before + 2 {
        assert!(
            Instant::now() < deadline,
            "no renewal after the restart ({} before, {} now)",
            renewals_before,
            lock.renewals()
        );
        tokio::time::sleep(ms(50)).await;
    }
    assert!(lock.is_held(), "a restart within the lease lost the lock");
    let left = lease_left_ms(&node, "pgf:restart").expect("the lease row survived the restart");
    assert!(
        left > 1000,
        "renewals after the restart move the row's expiry: {left} ms left"
    );
    let first = lock.fencing_token();
    lock.release().await.unwrap();
    let other = client_of(node.url(), ms(2000)).await;
    let next = other.acquire("pgf:restart", LockOptions::new(ttl)).await.unwrap();
    assert!(
        next.fencing_token() > first,
        "the counter row survived the restart"
    );
    next.release().await.unwrap();
}

/// P07: a crash (SIGKILL to the postmaster) that lasts longer than the
/// lease: the holder reports the lock lost as unreachable once its validity
/// runs out, and never later than that; after recovery the lock is free by
/// the server's clock and the tokens still rise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_runs_out_while_the_server_is_down_is_reported_lost_at_its_validity() {
    let node = PostgresNode::start();
    let client = client_of(node.url(), ms(500)).await;
    let ttl = ms(1200);
    let lock = client.acquire("pgf:crash", LockOptions::new(ttl)).await.unwrap();
    let acquired = Instant::now();
    node.kill();
    let reason = tokio::time::timeout(ttl * 3, lock.lost())
        .await
        .expect("the loss is signalled while the server is down");
    let signalled = acquired.elapsed();
    assert_eq!(reason, fencelock::LossReason::Unreachable);
    assert!(!lock.is_held());
    assert!(
        signalled <= ttl + ms(400),
        "lost signalled {signalled:?} after the grant, past the lease of {ttl:?}"
    );
    tokio::task::block_in_place(|| node.restart());
    let other = client_of(node.url(), ms(2000)).await;
    let next = other
        .acquire("pgf:crash", LockOptions::new(ttl).wait(ms(3000)))
        .await
        .expect("the crashed holder's lease ran out by the server's clock");
    assert!(next.fencing_token() > lock.fencing_token());
    next.release().await.unwrap();
}

/// P08: `pg_terminate_backend` on every session (the holder's, the
/// waiter's request session and its LISTEN session): the holder reconnects
/// and keeps renewing, and the waiter is still served promptly when the
/// lock is released — by a notification on its new LISTEN session or by
/// its bounded retry, never by a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_backends_reconnect_and_neither_holder_nor_waiter_is_stranded() {
    let node = PostgresNode::start();
    let holder = client_of(node.url(), ms(1000)).await;
    let waiter = client_of(node.url(), ms(1000)).await;
    let ttl = ms(1500);
    let lock = holder.acquire("pgf:term", LockOptions::new(ttl)).await.unwrap();
    let waiting = tokio::spawn(async move {
        let lock = waiter
            .acquire("pgf:term", LockOptions::new(ttl).wait(ms(20_000)))
            .await;
        (lock, Instant::now())
    });
    let mut terminated = 0;
    for _ in 0..3 {
        tokio::time::sleep(ms(700)).await;
        terminated += tokio::task::block_in_place(|| terminate_client_backends(&node));
    }
    assert!(terminated >= 3, "sessions were ended ({terminated})");
    tokio::time::sleep(ms(700)).await;
    assert!(lock.is_held(), "the holder lost its lock to terminated sessions");
    assert!(!waiting.is_finished(), "the waiter got a held lock");
    let released = Instant::now();
    lock.release().await.unwrap();
    let (next, served) = waiting.await.unwrap();
    let next = next.expect("the waiter is served after the release");
    let delay = served.saturating_duration_since(released);
    assert!(
        delay < ms(1000),
        "the waiter was served {delay:?} after the release"
    );
    assert!(next.fencing_token() > lock.fencing_token());
    next.release().await.unwrap();
}

/// P09: a silent network (the fault proxy drops everything): requests fail
/// as unavailable within the per-node timeout, naming the node; the holder
/// reports its lock lost at its validity; once the network heals, the
/// lease has run out by the server's clock and the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_server_times_out_and_the_lock_is_lost_at_its_validity() {
    let node = PostgresNode::start();
    let proxy = FaultProxy::start(node.port());
    let client = client_of(node.url_via(proxy.port()), ms(400)).await;
    let ttl = ms(1500);
    let lock = client.acquire("pgf:hole", LockOptions::new(ttl)).await.unwrap();
    let acquired = Instant::now();
    proxy.set(Mode::Blackhole);
    let reason = tokio::time::timeout(ttl * 3, lock.lost())
        .await
        .expect("the loss is signalled");
    assert_eq!(reason, fencelock::LossReason::Unreachable);
    assert!(
        acquired.elapsed() <= ttl + ms(400),
        "lost late: {:?}",
        acquired.elapsed()
    );

    let asked = Instant::now();
    let err = client
        .try_acquire("pgf:other", LockOptions::new(ttl))
        .await
        .expect_err("nothing answers");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        err.to_string().contains(&proxy.port().to_string()),
        "the error names the node: {err}"
    );
    assert!(
        asked.elapsed() < ms(1500),
        "refused {:?} after asking, past the per-node timeout",
        asked.elapsed()
    );

    proxy.set(Mode::Pass);
    let next = client
        .acquire("pgf:hole", LockOptions::new(ttl).wait(ms(5000)))
        .await
        .expect("the lock is free again once the network heals");
    assert!(next.fencing_token() > lock.fencing_token());
    next.release().await.unwrap();
}

/// P10a: the server cancels a script (its `statement_timeout` ran out
/// while a table lock held it up): the error is the server's, says which
/// setting did it, and nothing is left held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_cancelled_by_the_server_is_an_error_that_names_the_setting() {
    let node = PostgresNode::start();
    let client = client_of(node.url(), ms(3000)).await;
    client
        .acquire("pgf:setup", LockOptions::new(ms(1000)))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    node.sql("ALTER ROLE postgres SET statement_timeout = '200ms'");
    let blocker = TableLock::take(&node).await;
    // A new client: the role's setting applies to new sessions.
    let cancelled = client_of(node.url(), ms(3000)).await;
    let err = cancelled
        .try_acquire("pgf:cancelled", LockOptions::new(ms(30_000)))
        .await
        .expect_err("the server cancels the script");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let message = err.to_string();
    assert!(
        message.contains("57014") && message.contains("statement_timeout"),
        "the error says the server cancelled the statement and which setting to raise: {message}"
    );
    blocker.release().await;
    node.sql("ALTER ROLE postgres RESET statement_timeout");
    assert!(
        lease_left_ms(&node, "pgf:cancelled").is_none(),
        "a cancelled script left a lease row"
    );
}

/// P10b: a table lock holds a script up past the client's per-node timeout:
/// the acquire fails as timed out, and the script the server runs once the
/// table is free does not leave an orphan lease for its whole ttl: the
/// failed acquire's release runs after it on the same session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_held_up_past_the_timeout_leaves_no_orphan_lease() {
    let node = PostgresNode::start();
    let client = client_of(node.url(), ms(400)).await;
    client
        .acquire("pgf:setup", LockOptions::new(ms(1000)))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let blocker = TableLock::take(&node).await;
    let err = client
        .try_acquire("pgf:late", LockOptions::new(ms(30_000)))
        .await
        .expect_err("the script is held up past the per-node timeout");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    blocker.release().await;
    let other = client_of(node.url(), ms(2000)).await;
    let freed = Instant::now();
    let lock = other
        .acquire("pgf:late", LockOptions::new(ms(1000)).wait(ms(10_000)))
        .await
        .expect("the late grant was released, not left for its 30 s ttl");
    assert!(
        freed.elapsed() < ms(5000),
        "the orphan lease lasted {:?} after the table was free",
        freed.elapsed()
    );
    lock.release().await.unwrap();
}

/// A session holding `fencelock.keys` in ACCESS EXCLUSIVE mode, which holds
/// up every script until released.
struct TableLock {
    client: tokio_postgres::Client,
    connection: tokio::task::JoinHandle<()>,
}

impl TableLock {
    async fn take(node: &PostgresNode) -> TableLock {
        let (client, connection) = tokio_postgres::connect(&node.url(), tokio_postgres::NoTls)
            .await
            .expect("connect to lock the table");
        let connection = tokio::spawn(async move {
            let _ = connection.await;
        });
        client
            .batch_execute(
                "SET statement_timeout = 0; BEGIN; \
                 LOCK TABLE fencelock.keys IN ACCESS EXCLUSIVE MODE",
            )
            .await
            .expect("lock the table");
        TableLock { client, connection }
    }

    async fn release(self) {
        self.client.batch_execute("COMMIT").await.expect("commit");
        drop(self.client);
        let _ = self.connection.await;
    }
}

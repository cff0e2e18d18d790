//! One contract, both stores (issue 19): every test here is written once and
//! run against a real Redis node and a real PostgreSQL server. The lock must
//! not tell them apart: counter exactness under contention, rising tokens,
//! expiry, extend never re-creating, losses, fenced writes, bad input and
//! cancellation storms.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions, LossReason};
use fencelock_harness::{NodeOptions, PostgresNode, RedisNode};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A node of either store, with the direct access the tests need.
enum Store {
    Redis(RedisNode),
    Postgres(PostgresNode),
}

impl Store {
    fn start(postgres: bool) -> Store {
        if postgres {
            Store::Postgres(PostgresNode::start())
        } else {
            Store::Redis(RedisNode::start(&NodeOptions::default()))
        }
    }

    fn url(&self) -> String {
        match self {
            Store::Redis(node) => node.url(),
            Store::Postgres(node) => node.url(),
        }
    }

    async fn client(&self) -> Client {
        Client::builder()
            .node(self.url())
            .node_timeout(ms(2000))
            .build()
            .await
            .expect("a client builds")
    }

    /// The value of a string key, if it exists.
    fn get(&self, key: &str) -> Option<String> {
        match self {
            Store::Redis(node) => match node.command(&["GET", key]) {
                redis::Value::BulkString(bytes) => Some(String::from_utf8(bytes).unwrap()),
                _ => None,
            },
            Store::Postgres(node) => {
                let value = node.sql(&format!(
                    "SELECT value FROM fencelock.keys WHERE key = '{key}' \
                     AND (expires_at IS NULL OR expires_at > clock_timestamp())"
                ));
                (!value.is_empty()).then_some(value)
            }
        }
    }

    fn delete(&self, key: &str) {
        match self {
            Store::Redis(node) => drop(node.command(&["DEL", key])),
            Store::Postgres(node) => {
                drop(node.sql(&format!("DELETE FROM fencelock.keys WHERE key = '{key}'")))
            }
        }
    }

    /// Overwrites a key's value, keeping its expiry.
    fn overwrite(&self, key: &str, value: &str) {
        match self {
            Store::Redis(node) => drop(node.command(&["SET", key, value, "KEEPTTL"])),
            Store::Postgres(node) => drop(node.sql(&format!(
                "UPDATE fencelock.keys SET value = '{value}' WHERE key = '{key}'"
            ))),
        }
    }
}

fn lock_key(resource: &str) -> String {
    format!("fencelock:{{{resource}}}")
}

/// Writes each contract test once, as a test per store.
macro_rules! contract {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                super::$name(super::Store::start(false)).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(super::Store::start(true)).await;
            }
        }
    };
}

contract!(the_counter_is_exact_under_contention_and_tokens_rise);
async fn the_counter_is_exact_under_contention_and_tokens_rise(store: Store) {
    const TASKS: u64 = 6;
    const ROUNDS: u64 = 10;
    let clients = [store.client().await, store.client().await];
    // The unprotected read-modify-write the lock must serialize.
    let counter = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for client in clients.iter().cycle().take(TASKS as usize) {
        let (client, counter) = (client.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let mut tokens = Vec::new();
            for _ in 0..ROUNDS {
                let lock = client
                    .acquire("contract:counter", LockOptions::new(ms(5000)).wait(ms(60_000)))
                    .await
                    .expect("acquire under contention");
                let seen = counter.load(Ordering::SeqCst);
                tokio::task::yield_now().await;
                counter.store(seen + 1, Ordering::SeqCst);
                tokens.push(lock.fencing_token());
                lock.release().await.expect("release");
            }
            tokens
        }));
    }
    let mut tokens = Vec::new();
    for task in tasks {
        tokens.extend(task.await.unwrap());
    }
    assert_eq!(
        counter.load(Ordering::SeqCst),
        TASKS * ROUNDS,
        "an update was lost"
    );
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(
        tokens.len() as u64,
        TASKS * ROUNDS,
        "a fencing token was handed out twice"
    );
}

contract!(a_lease_expires_at_its_ttl_and_extend_never_recreates_it);
async fn a_lease_expires_at_its_ttl_and_extend_never_recreates_it(store: Store) {
    let client = store.client().await;
    let options = LockOptions::new(ms(400)).auto_renew(false);
    let lock = client.acquire("contract:lease", options.clone()).await.unwrap();
    assert!(
        client
            .try_acquire("contract:lease", options.clone())
            .await
            .unwrap()
            .is_none(),
        "held until the ttl"
    );
    tokio::time::sleep(ms(700)).await;
    assert_eq!(store.get(&lock_key("contract:lease")), None, "the lease ran out");
    let extended = lock.extend(ms(5000)).await;
    assert!(extended.is_err(), "extend of an expired lease succeeded");
    assert_eq!(
        store.get(&lock_key("contract:lease")),
        None,
        "extend re-created an expired lease"
    );
    let next = client.try_acquire("contract:lease", options).await.unwrap();
    assert!(next.is_some_and(|next| next.fencing_token() > lock.fencing_token()));
}

contract!(a_deleted_or_taken_lease_is_a_loss_with_its_reason);
async fn a_deleted_or_taken_lease_is_a_loss_with_its_reason(store: Store) {
    let client = store.client().await;
    let deleted = client
        .acquire("contract:deleted", LockOptions::new(ms(600)))
        .await
        .unwrap();
    store.delete(&lock_key("contract:deleted"));
    let reason = tokio::time::timeout(ms(3000), deleted.lost())
        .await
        .expect("loss signalled");
    assert_eq!(reason, LossReason::Deleted);

    let taken = client
        .acquire("contract:taken", LockOptions::new(ms(600)))
        .await
        .unwrap();
    store.overwrite(&lock_key("contract:taken"), "ffeeddccbbaa99887766554433221100");
    let reason = tokio::time::timeout(ms(3000), taken.lost())
        .await
        .expect("loss signalled");
    assert_eq!(reason, LossReason::TakenOver);
    assert_eq!(
        store.get(&lock_key("contract:taken")).as_deref(),
        Some("ffeeddccbbaa99887766554433221100"),
        "the loser must not touch the new owner's lease"
    );
}

contract!(fenced_writes_refuse_a_stale_token);
async fn fenced_writes_refuse_a_stale_token(store: Store) {
    let client = store.client().await;
    let old = client
        .acquire("contract:data", LockOptions::new(ms(5000)))
        .await
        .unwrap();
    let old_fence = old.fence();
    old.release().await.unwrap();
    let new = client
        .acquire("contract:data", LockOptions::new(ms(5000)))
        .await
        .unwrap();
    client
        .fenced_set("data:contract", "new", new.fence())
        .await
        .unwrap();
    let stale = client
        .fenced_set("data:contract", "old", old_fence)
        .await
        .unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::StaleToken, "{stale}");
    assert_eq!(
        client.fenced_get("data:contract").await.unwrap(),
        Some(("new".to_owned(), new.fencing_token()))
    );
    new.release().await.unwrap();
}

contract!(bad_input_is_refused_before_the_store_sees_it);
async fn bad_input_is_refused_before_the_store_sees_it(store: Store) {
    let client = store.client().await;
    for (resource, ttl) in [("", 1000), ("}starts-with-brace", 1000), ("ok", 0)] {
        let err = client
            .acquire(resource, LockOptions::new(ms(ttl)))
            .await
            .unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::InvalidArgument,
            "{resource:?} ttl {ttl}: {err}"
        );
    }
    let long = "r".repeat(fencelock::MAX_RESOURCE_LEN + 1);
    let err = client
        .acquire(&long, LockOptions::new(ms(1000)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

contract!(a_storm_of_cancelled_waits_leaves_the_lock_free_and_the_queue_empty);
async fn a_storm_of_cancelled_waits_leaves_the_lock_free_and_the_queue_empty(store: Store) {
    let client = store.client().await;
    let holder = client
        .acquire("contract:storm", LockOptions::new(ms(30_000)))
        .await
        .unwrap();
    let waiters: Vec<_> = (0..40)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .acquire("contract:storm", LockOptions::new(ms(30_000)).wait(ms(30_000)))
                    .await
            })
        })
        .collect();
    tokio::time::sleep(ms(300)).await;
    for waiter in &waiters {
        waiter.abort();
    }
    for waiter in waiters {
        assert!(waiter.await.unwrap_err().is_cancelled());
    }
    client.settle().await;
    holder.release().await.unwrap();
    let next = client
        .try_acquire("contract:storm", LockOptions::new(ms(5000)))
        .await
        .unwrap();
    assert!(next.is_some(), "the lock is not free after the storm");
    let states = client.inspect("contract:storm").await.unwrap();
    assert_eq!(
        states[0].waiters, 0,
        "cancelled waiters left the queue: {states:?}"
    );
}

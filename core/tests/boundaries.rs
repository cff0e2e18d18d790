//! Bad input, fenced writes, the blocking facade, fork, ACL and Redis Cluster.

mod common;

use std::time::Duration;

use common::*;
use fencelock::{Client, ErrorKind, LockOptions, MAX_RESOURCE_LEN, MAX_TTL, blocking};

/// `start()` refuses bad configuration on the spot, without a runtime or a
/// node; a good one is usable at once, its operations waiting for the
/// connection made in the background.
#[test]
fn start_validates_at_once_and_connects_in_the_background() {
    let err = Client::builder().node("redis://").start().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    let err = Client::builder().start().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");

    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = builder(&nodes).start().unwrap();
    let lock = blocking::Client::from_async(client.clone())
        .acquire("started", LockOptions::new(ms(1000)))
        .unwrap();
    assert!(lock.is_held());
    lock.release().unwrap();
}

/// A client built on a tokio runtime makes its connections there, so that a
/// Rust caller's requests and their connection's I/O share that runtime
/// (docs/performance.md, "Where connections live").
#[tokio::test]
async fn connections_live_on_the_runtime_that_built_the_client() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let client = client(&nodes).await;
    assert!(
        metrics.num_alive_tasks() > before,
        "the connection's task runs elsewhere: {} tasks before, {} after",
        before,
        metrics.num_alive_tasks()
    );
    drop(client);
}

/// A client started on a runtime that shuts down before its first
/// connections are made still works elsewhere: its nodes connect on use.
#[test]
fn a_client_outlives_the_runtime_it_was_started_on() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = {
        let _inside = runtime.enter();
        builder(&nodes).start().unwrap()
    };
    drop(runtime);
    let lock = blocking::Client::from_async(client)
        .acquire("outlived", LockOptions::new(ms(1000)))
        .unwrap();
    assert!(lock.is_held());
    lock.release().unwrap();
}

#[tokio::test]
async fn bad_arguments_give_typed_errors() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let ttl = LockOptions::new(ms(1000));
    let kind = |r: fencelock::Result<fencelock::Lock>| r.unwrap_err().kind();
    assert_eq!(
        kind(client.acquire("", ttl.clone()).await),
        ErrorKind::InvalidArgument
    );
    let huge = "x".repeat(MAX_RESOURCE_LEN + 1);
    assert_eq!(
        kind(client.acquire(&huge, ttl.clone()).await),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(client.acquire("}x", ttl.clone()).await),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(client.acquire("r", LockOptions::new(Duration::ZERO)).await),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(client.acquire("r", LockOptions::new(MAX_TTL + ms(1))).await),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(client.acquire("r", LockOptions::new(Duration::MAX)).await),
        ErrorKind::InvalidArgument
    );
    let lock = client.acquire("r", ttl.clone()).await.unwrap();
    assert_eq!(
        lock.extend(Duration::ZERO).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        lock.extend(Duration::MAX).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    // Binary-safe but odd names work and map to one key each.
    let odd = client.acquire("ünï{c}ode\u{0}nul", ttl.clone()).await.unwrap();
    assert!(odd.is_held());
    assert!(client.acquire(&"y".repeat(MAX_RESOURCE_LEN), ttl).await.is_ok());
    for url in [
        "",
        "redis://",
        "http://127.0.0.1:1",
        "redis://127.0.0.1:0",
        "redis://127.0.0.1:99999",
        "redis://h/x",
    ] {
        let err = Client::builder().node(url).build().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{url}: {err}");
    }
}

#[tokio::test]
async fn stale_fenced_write_is_rejected() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let old = client
        .acquire("stock", LockOptions::new(ms(200)).auto_renew(false))
        .await
        .unwrap();
    let old_token = old.fencing_token();
    tokio::time::sleep(ms(300)).await; // the holder "pauses" past its lease
    let new = client.acquire("stock", LockOptions::new(ms(2000))).await.unwrap();
    client.fenced_set("data:stock", "99", new.fence()).await.unwrap();
    // The same grant may write again; a bare equal token may not.
    client.fenced_set("data:stock", "98", new.fence()).await.unwrap();
    let bare = client
        .fenced_set("data:stock", "97", new.fencing_token())
        .await
        .unwrap_err();
    assert_eq!(bare.kind(), ErrorKind::StaleToken, "{bare}");
    let err = client
        .fenced_set("data:stock", "100", old_token)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StaleToken, "{err}");
    assert_eq!(
        client.fenced_get("data:stock").await.unwrap(),
        Some(("98".to_owned(), new.fencing_token()))
    );
    assert_eq!(client.fenced_get("data:absent").await.unwrap(), None);
}

#[test]
fn blocking_facade_works_from_threads_and_refuses_inside_a_runtime() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = blocking::Client::connect(builder(&nodes)).unwrap();
    let lock = client.acquire("sync", LockOptions::new(ms(1000))).unwrap();
    assert!(
        client
            .try_acquire("sync", LockOptions::new(ms(1000)))
            .unwrap()
            .is_none()
    );
    lock.extend(ms(2000)).unwrap();
    assert_eq!(
        lock.check_extend(ms(1)).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(lock.status(), fencelock::LockStatus::Held);
    client.fenced_set("sync:data", "v1", lock.fence()).unwrap();
    assert_eq!(
        client.fenced_get("sync:data").unwrap(),
        Some(("v1".to_owned(), lock.fencing_token()))
    );
    let states = client.inspect("sync").unwrap();
    assert!(states.len() == 1 && states[0].held, "{states:?}");
    assert_eq!((client.nodes().len(), client.quorum()), (1, 1));
    assert_eq!(lock.wait_lost(ms(50)).unwrap(), None);
    nodes[0].command(&["DEL", &lock_key("sync")]);
    assert_eq!(
        lock.wait_lost(ms(1000)).unwrap(),
        Some(fencelock::LossReason::Deleted)
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = runtime
        .block_on(async { client.try_acquire("sync", LockOptions::new(ms(1000))) })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WouldBlock, "{err}");
    client.close();
    let closed = client
        .try_acquire("sync", LockOptions::new(ms(1000)))
        .unwrap_err();
    assert_eq!(closed.kind(), ErrorKind::Closed, "{closed}");
}

#[test]
fn a_forked_child_gets_a_clear_error_not_a_hang() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = blocking::Client::connect(builder(&nodes)).unwrap();
    let lock = client.acquire("pre-fork", LockOptions::new(ms(1000))).unwrap();
    // SAFETY: the child only calls into fencelock and then _exit()s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = match client.try_acquire("in-child", LockOptions::new(ms(1000))) {
            Err(err) if err.kind() == ErrorKind::Closed && err.to_string().contains("fork") => 0,
            _ => 1,
        };
        let code = if code == 0 && lock.release().is_err() {
            0
        } else {
            1
        };
        // SAFETY: leave the child without running the test harness's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for the child we just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status), "child did not exit normally");
    assert_eq!(libc::WEXITSTATUS(status), 0, "child did not get a Closed error");
    assert!(lock.is_held(), "the child's attempt disturbed the parent's lock");
    lock.release().unwrap();
}

#[tokio::test]
async fn acl_user_with_only_the_documented_commands_works() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    nodes[0].command(&[
        "ACL",
        "SETUSER",
        "locker",
        "on",
        ">s3cret-pw",
        "resetkeys",
        "~fencelock:*",
        "~data:*",
        "resetchannels",
        "&fencelock:wake:*",
        "-@all",
        "+evalsha",
        "+eval",
        "+get",
        "+set",
        "+del",
        "+pexpire",
        "+incr",
        "+pttl",
        "+exists",
        "+time",
        "+zadd",
        "+zrem",
        "+zscore",
        "+zrank",
        "+zrange",
        "+zrangebyscore",
        "+publish",
        "+subscribe",
        "+hget",
        "+hset",
        "+hmget",
        "+ping",
        "+hello",
        "+client|setname",
    ]);
    let good = builder(&nodes)
        .username("locker")
        .password("s3cret-pw")
        .build()
        .await
        .unwrap();
    // Auto-renewal first: the watchdog's pipelines must work without SCRIPT LOAD rights.
    let lock = good.acquire("acl", LockOptions::new(ms(300))).await.unwrap();
    tokio::time::sleep(ms(500)).await;
    assert!(lock.is_held(), "renewals failed for a user without SCRIPT LOAD");
    assert!(lock.renewals() >= 2, "{} renewals", lock.renewals());
    lock.extend(ms(1000)).await.unwrap();
    good.fenced_set("data:acl", "1", lock.fencing_token())
        .await
        .unwrap();
    // A waiter queues up, subscribes and is handed the lock by the release.
    let waiter = {
        let good = good.clone();
        tokio::spawn(async move {
            good.acquire("acl", LockOptions::new(ms(1000)).wait(ms(5000)))
                .await
        })
    };
    tokio::time::sleep(ms(200)).await;
    let subscribed = match nodes[0].command(&["CLIENT", "LIST", "TYPE", "pubsub"]) {
        redis::Value::BulkString(text) => String::from_utf8(text).unwrap(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("unexpected CLIENT LIST reply {other:?}"),
    };
    assert!(
        subscribed.contains("user=locker"),
        "the waiter could not subscribe: {subscribed:?}"
    );
    lock.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();
    let err = builder(&nodes)
        .username("locker")
        .password("wrong-pw")
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(!err.to_string().contains("wrong-pw") && !format!("{err:?}").contains("wrong-pw"));
    // Started in the background, the same refusal fails each operation instead.
    let started = builder(&nodes)
        .username("locker")
        .password("wrong-pw")
        .start()
        .expect("the configuration itself is valid");
    for _ in 0..2 {
        let err = started
            .acquire("acl", LockOptions::new(ms(1000)))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    }
    let err = started.fenced_get("data:acl").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    // A user that may not DEL: release fails, and the error names the permission problem.
    nodes[0].command(&["ACL", "SETUSER", "locker", "-del"]);
    let lock = good.acquire("acl", LockOptions::new(ms(1000))).await.unwrap();
    let err = lock.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(err.to_string().contains("permission denied"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_can_be_a_node() {
    let cluster = fencelock_harness::RedisCluster::start(3);
    let client = Client::builder()
        .node(cluster.url())
        .node_timeout(ms(500))
        .build()
        .await
        .unwrap();
    // Resources spread over all shards; each lock's keys share one slot.
    let mut tokens = Vec::new();
    for i in 0..30 {
        let lock = client
            .acquire(&format!("cl:{i}"), LockOptions::new(ms(2000)))
            .await
            .unwrap();
        assert!(
            client
                .try_acquire(&format!("cl:{i}"), LockOptions::new(ms(2000)))
                .await
                .unwrap()
                .is_none()
        );
        tokens.push(lock.fencing_token());
        lock.release().await.unwrap();
    }
    assert!(
        tokens.iter().all(|t| *t == 1),
        "each resource's first token is 1: {tokens:?}"
    );
    let shards_used = cluster
        .nodes()
        .iter()
        .filter(|n| !redis_keys(n, "fencelock:*").is_empty())
        .count();
    assert_eq!(shards_used, 3, "resources did not spread over the shards");
    // Contention against the cluster keeps the counter exact.
    let clients = [client.clone(), client.clone()];
    let mut tasks = Vec::new();
    for client in clients {
        for _ in 0..4 {
            let client = client.clone();
            tasks.push(tokio::spawn(async move {
                let mut tokens = Vec::new();
                for _ in 0..10 {
                    let lock = client
                        .acquire("cl:hot", LockOptions::new(ms(2000)).wait(ms(20_000)))
                        .await
                        .unwrap();
                    tokens.push(lock.fencing_token());
                    lock.release().await.unwrap();
                }
                tokens
            }));
        }
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 80, "duplicate fencing tokens on the cluster");
}

fn redis_keys(node: &RedisNode, pattern: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(pattern)
        .query(&mut node.connection())
        .unwrap()
}

#[test]
fn a_client_outlives_the_runtime_it_was_built_on() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let first = tokio::runtime::Runtime::new().unwrap();
    let (client, lock) = first.block_on(async {
        let client = client(&nodes).await;
        let lock = client.acquire("moved", LockOptions::new(ms(300))).await.unwrap();
        (client, lock)
    });
    drop(first); // the foreground connections' tasks die with it
    let second = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    second.block_on(async {
        // The watchdog lives on fencelock's runtime: the lock stays renewed.
        tokio::time::sleep(ms(900)).await;
        assert!(lock.is_held(), "renewals stopped with the first runtime");
        assert!(lock.renewals() >= 4);
        lock.release().await.unwrap();
        let again = client.acquire("moved", LockOptions::new(ms(300))).await.unwrap();
        again.release().await.unwrap();
    });
}

#[tokio::test]
async fn inspect_shows_each_nodes_view_without_the_token() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    // Not a timeout test: a slow node must neither lose its grant nor show as an error.
    let client = builder(&nodes)
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .unwrap();
    let lock = client
        .acquire("seen", LockOptions::new(ms(30_000)))
        .await
        .unwrap();
    // Acquire returns at a quorum: wait until the grant that lost the race
    // landed too. (On this single-threaded runtime every request is written
    // before any reply is read, so it is never dropped unsent.)
    for node in &nodes {
        assert!(
            wait_until(ms(10_000), || get(node, &lock_key("seen")).is_some()).await,
            "a grant never landed on {}",
            node.url()
        );
    }
    nodes[2].kill();
    let states = client.inspect("seen").await.unwrap();
    assert_eq!(states.len(), 3);
    for state in &states[..2] {
        assert!(state.held, "{state:?}");
        assert!(
            state.ttl_ms.is_some_and(|t| t > 20_000 && t <= 30_000),
            "{state:?}"
        );
        assert_eq!(state.fencing_counter, lock.fencing_token());
        assert!(state.error.is_none());
    }
    assert!(states[2].error.is_some() && !states[2].held);
    let token = get(&nodes[0], &lock_key("seen")).unwrap();
    assert!(!format!("{states:?}").contains(&token));
    lock.release().await.unwrap();
    assert!(!client.inspect("seen").await.unwrap()[0].held);
}

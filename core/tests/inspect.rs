//! What operators see (issue 21): each node's view of a lock with its
//! waiters (`Client::inspect`), and the locks under a prefix
//! (`Client::resources`), which `fencelock inspect` and `fencelock top` show.

mod common;

use common::*;
use fencelock::{Client, ErrorKind, LockOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_counts_the_live_waiters_on_every_node() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let client = client(&nodes).await;
    let lock = client
        .acquire("queue:1", LockOptions::new(ms(30_000)))
        .await
        .unwrap();
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let client = client.clone();
            // Served in either order (they arrive together): each releases.
            tokio::spawn(async move {
                let lock = client
                    .acquire("queue:1", LockOptions::new(ms(30_000)).wait(ms(20_000)))
                    .await?;
                lock.release().await
            })
        })
        .collect();
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = client.inspect("queue:1").await.unwrap();
        if seen.iter().all(|s| s.waiters == 2) {
            break;
        }
        tokio::time::sleep(ms(50)).await;
    }
    for state in &seen {
        assert_eq!(state.waiters, 2, "{state:?}");
        assert!(state.held && state.error.is_none(), "{state:?}");
        assert_eq!(state.fencing_counter, lock.fencing_token(), "{state:?}");
    }

    // Each release hands the lock to a waiter, which leaves the queue.
    lock.release().await.unwrap();
    for waiter in waiters {
        if let Err(e) = waiter.await.unwrap() {
            panic!("a waiter was not served: {e}");
        }
    }
    let mut left = u64::MAX;
    for _ in 0..100 {
        left = client
            .inspect("queue:1")
            .await
            .unwrap()
            .iter()
            .map(|s| s.waiters)
            .max()
            .unwrap();
        if left == 0 {
            break;
        }
        tokio::time::sleep(ms(50)).await;
    }
    assert_eq!(left, 0, "waiters still counted after both were served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_lease_ran_out_is_not_counted() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    // A waiter entry whose lease ended long ago (node time, ms), as a
    // waiter that died would leave it, and one that runs for a day.
    let queue = format!("{}:queue", lock_key("stale"));
    let leases = format!("{}:leases", lock_key("stale"));
    nodes[0].command(&["ZADD", &queue, "1", "dead:1", "2", "alive:1"]);
    nodes[0].command(&["ZADD", &leases, "1000", "dead:1"]);
    let day_from_now = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 86_400_000)
        .to_string();
    nodes[0].command(&["ZADD", &leases, &day_from_now, "alive:1"]);
    let state = &client.inspect("stale").await.unwrap()[0];
    assert_eq!(state.waiters, 1, "{state:?}");
    assert!(!state.held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_lists_the_locks_of_the_prefix_that_match() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let client = client(&nodes).await;
    for resource in ["jobs:1", "jobs:2", "mail:1", "odd}name"] {
        let lock = client
            .acquire(resource, LockOptions::new(ms(5000)))
            .await
            .unwrap();
        lock.release().await.unwrap();
    }
    let permit = client
        .semaphore("jobs:pool", 2)
        .unwrap()
        .acquire(LockOptions::new(ms(5000)))
        .await
        .unwrap();
    permit.release().await.unwrap();
    let read = client
        .rw_lock("jobs:doc")
        .unwrap()
        .read(LockOptions::new(ms(5000)))
        .await
        .unwrap();
    read.release().await.unwrap();

    assert_eq!(
        client.resources("*", 100).await.unwrap(),
        ["jobs:1", "jobs:2", "mail:1", "odd}name"],
        "locks only, sorted; semaphores and read-write locks are not listed"
    );
    assert_eq!(
        client.resources("jobs:*", 100).await.unwrap(),
        ["jobs:1", "jobs:2"]
    );
    assert_eq!(client.resources("*", 1).await.unwrap().len(), 1);
    assert!(client.resources("none:*", 100).await.unwrap().is_empty());

    // Glob characters in the prefix are the prefix's own: `p*:` must not
    // list the locks of `pp:`.
    let starred = builder(&nodes).key_prefix("p*:").build().await.unwrap();
    let plain = builder(&nodes).key_prefix("pp:").build().await.unwrap();
    plain
        .acquire("other", LockOptions::new(ms(5000)))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    starred
        .acquire("own", LockOptions::new(ms(5000)))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    assert_eq!(starred.resources("*", 100).await.unwrap(), ["own"]);
    assert_eq!(plain.resources("*", 100).await.unwrap(), ["other"]);

    // One node down: the others answer; all down: unavailable, saying so.
    nodes[0].kill();
    assert_eq!(client.resources("mail:*", 100).await.unwrap(), ["mail:1"]);
    nodes[1].kill();
    nodes[2].kill();
    let err = client.resources("*", 100).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("+scan"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_refuses_a_redis_cluster_node_and_says_why() {
    let cluster = fencelock_harness::RedisCluster::start(3);
    let client = Client::builder()
        .node(cluster.url())
        .node_timeout(ms(500))
        .build()
        .await
        .unwrap();
    let err = client.resources("*", 10).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("Redis Cluster"), "{err}");
    let lock = client
        .acquire("on-cluster", LockOptions::new(ms(5000)))
        .await
        .unwrap();
    let state = &client.inspect("on-cluster").await.unwrap()[0];
    assert!(
        state.held && state.waiters == 0 && state.error.is_none(),
        "{state:?}"
    );
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_views_need_only_zcount_and_scan_beyond_the_documented_rights() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    // docs/protocol.md §3 "ACL rights": the application's rights, then the operators' two.
    let app_rights = "-@all +evalsha +eval +get +set +del +pexpire +incr +exists +pttl +time +zadd +zrem \
                      +zscore +zrank +zrange +zrangebyscore +publish +mget +sadd +srem +smembers +subscribe \
                      +hget +hset +hmget +ping +hello +client|setname";
    let user = |name: &str, extra: &str| {
        let mut args = vec![
            "ACL",
            "SETUSER",
            name,
            "on",
            ">pw",
            "resetkeys",
            "~fencelock:*",
            "resetchannels",
        ];
        args.extend(["&fencelock:wake:*", "&fencelock:leader:*"]);
        args.extend(app_rights.split_whitespace());
        args.extend(extra.split_whitespace());
        nodes[0].command(&args);
        let url = nodes[0].url().replace("redis://", &format!("redis://{name}:pw@"));
        async move {
            Client::builder()
                .node(url)
                .node_timeout(ms(2000))
                .build()
                .await
                .unwrap()
        }
    };
    let operator = user("operator", "+zcount +scan").await;
    let lock = operator
        .acquire("acl:1", LockOptions::new(ms(5000)))
        .await
        .unwrap();
    let state = &operator.inspect("acl:1").await.unwrap()[0];
    assert!(state.held && state.error.is_none(), "{state:?}");
    assert_eq!(operator.resources("acl:*", 10).await.unwrap(), ["acl:1"]);
    lock.release().await.unwrap();

    let app = user("app", "").await;
    let err = app.resources("*", 10).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(err.to_string().contains("+scan"), "{err}");
    let state = &app.inspect("acl:1").await.unwrap()[0];
    assert!(state.error.is_some(), "STATUS ran without +zcount: {state:?}");
}

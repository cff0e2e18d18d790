//! Leader election (docs/protocol.md §4.10): candidates campaign, the
//! winner announces itself, observers follow by push; a dead leader is
//! replaced within its ttl and a bound, with a larger epoch that fences
//! the old leader's writes out.

mod common;

use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use common::*;
use fencelock::{CampaignOptions, ErrorKind, Leader, MAX_LEADER_VALUE, Observation};
use fencelock_harness::RedisNode;

fn campaign(ttl: u64, value: &str) -> CampaignOptions {
    CampaignOptions::new(ms(ttl)).value(value)
}

/// The next leader the observation yields, within `limit`.
async fn next_within(observation: &mut Observation, limit: Duration) -> Option<Leader> {
    tokio::time::timeout(limit, observation.next())
        .await
        .ok()
        .flatten()
}

/// An observer that has subscribed on every node, so what it learns from
/// now on comes by push.
async fn subscribed_observer(nodes: &[RedisNode], name: &str) -> Observation {
    subscribed_beside(nodes, name, 0).await
}

/// [`subscribed_observer`] beside `others` observers already subscribed
/// on every node.
async fn subscribed_beside(nodes: &[RedisNode], name: &str, others: i64) -> Observation {
    let observation = client(nodes).await.observe(name).unwrap();
    let all = wait_until(ms(5_000), || {
        nodes
            .iter()
            .all(|node| leader_observers(node, name) == others + 1)
    })
    .await;
    assert!(all, "the observer never subscribed everywhere");
    observation
}

/// Polling an observation as a `Stream` and calling its `next` do not hold
/// each other up: a stream poll left pending (a timeout around
/// `StreamExt::next`) takes nothing a later `next` needs, and each sees the
/// new leader. Before the fix the pending stream poll kept the lock that
/// every `next` waits for, so `next` hung until the stream was polled again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_stream_poll_does_not_hold_up_next() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let mut observation = subscribed_observer(&nodes, "mixed").await;
    // Not imported: `StreamExt::next` would take over `observation.next()`.
    let polled =
        futures_util::StreamExt::poll_next_unpin(&mut observation, &mut Context::from_waker(Waker::noop()));
    assert!(
        polled.is_pending(),
        "a leader before anyone campaigned: {polled:?}"
    );
    let candidate = client(&nodes).await;
    let leadership = candidate
        .campaign("mixed", campaign(5_000, "host-a:1"))
        .await
        .unwrap();
    let seen = tokio::time::timeout(ms(2_000), Observation::next(&observation))
        .await
        .expect("next never saw the leader");
    assert_eq!(seen.map(|leader| leader.epoch), Some(leadership.epoch()));
    let streamed = tokio::time::timeout(ms(2_000), futures_util::StreamExt::next(&mut observation))
        .await
        .expect("the stream never saw the leader");
    assert_eq!(streamed.map(|leader| leader.epoch), Some(leadership.epoch()));
    leadership.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_learn_each_new_leader_by_push() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let mut observation = subscribed_observer(&nodes, "push").await;
    let (first, second) = (client(&nodes).await, client(&nodes).await);
    let leader = first.campaign("push", campaign(5_000, "host-a:1")).await.unwrap();
    assert!(leader.is_leader());
    // Within a second, well before the observer's next read (2 s): by push.
    let seen = next_within(&mut observation, ms(1_000)).await.expect("no push");
    assert_eq!(
        seen,
        Leader {
            value: b"host-a:1".to_vec(),
            epoch: leader.epoch()
        }
    );

    // A second candidate waits; the leader resigns; it wins at once.
    let candidate = tokio::spawn(async move { second.campaign("push", campaign(5_000, "host-b:2")).await });
    let in_line = wait_until(ms(5_000), || {
        nodes[0].command(&["ZCARD", &format!("{}:queue", lock_key("push"))]) == redis::Value::Int(1)
    })
    .await;
    assert!(in_line, "the second candidate never got in line");
    let resigned = Instant::now();
    leader.resign().await.unwrap();
    let successor = candidate.await.unwrap().unwrap();
    assert!(resigned.elapsed() < ms(1_000), "took {:?}", resigned.elapsed());
    assert!(successor.epoch() > leader.epoch());
    let seen = next_within(&mut observation, ms(1_000)).await.expect("no push");
    assert_eq!(
        seen,
        Leader {
            value: b"host-b:2".to_vec(),
            epoch: successor.epoch()
        }
    );
    assert_eq!(leader.resign().await.unwrap_err().kind(), ErrorKind::NotHeld);
    successor.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_leader_is_replaced_and_fenced_out() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    let mut observation = subscribed_observer(&nodes, "failover").await;
    let (old_client, new_client) = (client(&nodes).await, client(&nodes).await);
    let old = old_client
        .campaign("failover", campaign(600, "old"))
        .await
        .unwrap();
    let old_fence = old.fence();
    assert_eq!(
        next_within(&mut observation, ms(1_000)).await.unwrap().value,
        b"old"
    );
    old_client
        .fenced_set("failover:data", "by old", old_fence)
        .await
        .unwrap();

    let started = Instant::now();
    let follower = tokio::spawn(async move {
        let leadership = new_client.campaign("failover", campaign(5_000, "new")).await;
        (leadership, new_client)
    });
    // The leader dies: it stops renewing, nobody resigns.
    drop(old);
    let (new, new_client) = follower.await.unwrap();
    let new = new.unwrap();
    // Its lease (600 ms) ran out, then a waiter's bound (docs/protocol.md §4.9).
    assert!(started.elapsed() < ms(600 + 500), "took {:?}", started.elapsed());
    assert!(new.epoch() > old_fence.token);
    let seen = next_within(&mut observation, ms(1_000)).await.expect("no push");
    assert_eq!((seen.value.as_slice(), seen.epoch), (&b"new"[..], new.epoch()));

    new_client
        .fenced_set("failover:data", "by new", new.fence())
        .await
        .unwrap();
    let late = old_client
        .fenced_set("failover:data", "late, by old", old_fence)
        .await;
    assert_eq!(late.unwrap_err().kind(), ErrorKind::StaleToken);
    new.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_starts_with_the_current_leader_and_survives_a_lost_message() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let candidate = client(&nodes).await;
    let value = [0u8, 255, b' ', b'\n', 7];
    let first = candidate
        .campaign("current", CampaignOptions::new(ms(5_000)).value(value.to_vec()))
        .await
        .unwrap();
    let mut observation = client(&nodes).await.observe("current").unwrap();
    let seen = next_within(&mut observation, ms(2_000))
        .await
        .expect("no current leader");
    assert_eq!(
        seen,
        Leader {
            value: value.to_vec(),
            epoch: first.epoch()
        }
    );

    // The observer's subscription dies and the next leader's message is
    // lost: the observer learns of it at its next read.
    assert!(wait_until(ms(5_000), || leader_observers(&nodes[0], "current") == 1).await);
    first.resign().await.unwrap();
    nodes[0].command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    let second = candidate
        .campaign("current", campaign(5_000, "second"))
        .await
        .unwrap();
    let seen = next_within(&mut observation, ms(4_000))
        .await
        .expect("never learned the new leader");
    assert_eq!(seen.epoch, second.epoch());
    second.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_and_observe_refuse_bad_input() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let long = vec![b'x'; MAX_LEADER_VALUE + 1];
    let err = client
        .campaign("bad", CampaignOptions::new(ms(1_000)).value(long))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("leader value"), "{err}");
    assert_eq!(client.observe("").unwrap_err().kind(), ErrorKind::InvalidArgument);
    let err = client
        .campaign("bad", CampaignOptions::new(ms(1)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    // A set wait bounds the campaign; unset, it waits until it wins.
    let leader = client.campaign("busy", campaign(5_000, "a")).await.unwrap();
    let other = common::client(&nodes).await;
    let err = other
        .campaign("busy", campaign(5_000, "b").wait(ms(200)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    leader.resign().await.unwrap();
    client.close();
    assert_eq!(client.observe("x").unwrap_err().kind(), ErrorKind::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observations_end_when_their_client_closes() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let idle = client.observe("closing").unwrap();
    // An observation subscribes as soon as it is made: count it in before
    // the second one, or the count could be 1 or 2 when it is looked at.
    let subscribed = wait_until(ms(5_000), || leader_observers(&nodes[0], "closing") == 1).await;
    assert!(subscribed, "the idle observation never subscribed");
    let waiting = subscribed_beside(&nodes, "closing", 1).await;
    let pending = tokio::spawn(async move {
        let waiting = waiting;
        waiting.next().await
    });
    tokio::time::sleep(ms(100)).await;
    assert!(!pending.is_finished(), "nobody leads: the observation waits");
    // The observer of `subscribed_observer` has its own client: close both.
    client.close();
    assert_eq!(
        tokio::time::timeout(ms(1_000), idle.next()).await,
        Ok(None),
        "an observation of a closed client goes on"
    );
    let unsubscribed = wait_until(ms(2_000), || leader_observers(&nodes[0], "closing") <= 1).await;
    assert!(
        unsubscribed,
        "the closed client's observation kept its subscription"
    );
    pending.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_renews_even_where_the_client_does_not() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = builder(&nodes).default_auto_renew(false).build().await.unwrap();
    let leader = client.campaign("renewed", campaign(300, "a")).await.unwrap();
    tokio::time::sleep(ms(900)).await;
    assert!(leader.is_leader(), "a leader's lease ran out: it was not renewed");
    leader.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_shared_observation_ends_every_wait() {
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let observation = std::sync::Arc::new(subscribed_observer(&nodes, "shared").await);
    let waits: Vec<_> = (0..2)
        .map(|_| {
            let observation = observation.clone();
            tokio::spawn(async move { observation.next().await })
        })
        .collect();
    tokio::time::sleep(ms(100)).await;
    assert!(
        waits.iter().all(|wait| !wait.is_finished()),
        "nobody leads: both wait"
    );
    observation.close();
    assert!(observation.is_closed());
    for wait in waits {
        let ended = tokio::time::timeout(ms(1_000), wait)
            .await
            .expect("a wait outlived close()");
        assert_eq!(ended.unwrap(), None);
    }
    assert_eq!(
        observation.next().await,
        None,
        "a wait after close() yields None at once"
    );
    let unsubscribed = wait_until(ms(2_000), || leader_observers(&nodes[0], "shared") == 0).await;
    assert!(unsubscribed, "close() kept the subscription");
}

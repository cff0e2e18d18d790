//! `Client::settle`: waiting for the undo of abandoned acquire attempts, so
//! a process about to exit leaves no attempt's key behind.

mod common;

use common::*;
use fencelock::LockOptions;
use fencelock_harness::{FaultProxy, Mode};

/// The attempt's key is on the node and its granting reply is 200 ms away
/// when the acquire is dropped: once `settle` returns, the undo has run.
#[tokio::test]
async fn settle_returns_once_a_cancelled_attempt_is_undone() {
    let node = RedisNode::start(&NodeOptions::default());
    let proxy = FaultProxy::start(node.port());
    let client = fencelock::Client::builder()
        .node(proxy.url())
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .expect("client builds");
    proxy.set(Mode::Delay {
        each_way: ms(200),
        jitter: ms(0),
    });
    let acquire = client.acquire("settle", LockOptions::new(ms(30_000)).wait(ms(0)));
    let key_on_node = async {
        while get(&node, &lock_key("settle")).is_none() {
            tokio::time::sleep(ms(2)).await;
        }
    };
    tokio::select! {
        acquired = acquire => panic!("the grant beat the test: {acquired:?}"),
        () = key_on_node => {}
    }
    // The acquire future is dropped here, mid-attempt.
    tokio::time::timeout(ms(10_000), client.settle())
        .await
        .expect("settle is bounded by the node timeout");
    assert_eq!(
        get(&node, &lock_key("settle")),
        None,
        "settle returned before the undo ran"
    );
    // Nothing running: at once.
    tokio::time::timeout(ms(1000), client.settle())
        .await
        .expect("settle with nothing to wait for");
}

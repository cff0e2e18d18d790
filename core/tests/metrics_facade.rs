//! The same counters reach the `metrics` crate's facade, for any exporter:
//! a debugging recorder installed as the process's recorder sees them with
//! their documented names and labels.

mod common;

use common::*;
use fencelock::{LockOptions, metric_names};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_facade_receives_the_counters_by_name() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().expect("the only recorder of this test binary");
    let nodes = RedisNode::start_many(1, &NodeOptions::default());
    let client = client(&nodes).await;
    let lock = client
        .acquire("facade", LockOptions::new(ms(5_000)))
        .await
        .unwrap();
    assert!(
        client
            .try_acquire("facade", LockOptions::new(ms(5_000)))
            .await
            .unwrap()
            .is_none()
    );
    lock.release().await.unwrap();

    let seen = snapshotter.snapshot().into_vec();
    let value = |name: &str, label: Option<(&str, &str)>| {
        seen.iter().find_map(|(key, _, _, value)| {
            let key = key.key();
            let labelled = label.is_none_or(|(k, v)| key.labels().any(|l| l.key() == k && l.value() == v));
            (key.name() == name && labelled).then_some(value)
        })
    };
    assert_eq!(value(metric_names::ACQUIRED, None), Some(&DebugValue::Counter(1)));
    assert_eq!(
        value(metric_names::FAILED, Some(("kind", "not_acquired"))),
        Some(&DebugValue::Counter(1))
    );
    assert_eq!(value(metric_names::RELEASED, None), Some(&DebugValue::Counter(1)));
    assert!(matches!(value(metric_names::HELD, None), Some(DebugValue::Gauge(g)) if g.into_inner() == 0.0));
    match value(metric_names::ACQUIRE_LATENCY, None) {
        Some(DebugValue::Histogram(samples)) => assert_eq!(samples.len(), 2),
        other => panic!("no latency histogram: {other:?}"),
    }
    assert!(
        seen.iter()
            .all(|(key, ..)| key.key().labels().all(|l| l.key() != "resource")),
        "a resource label without per-resource labels asked for"
    );

    // Asked for, each counter carries the resource's name.
    let labelled = builder(&nodes).metrics_per_resource(true).build().await.unwrap();
    labelled
        .acquire("per-resource", LockOptions::new(ms(5_000)))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let seen = snapshotter.snapshot().into_vec();
    let labelled_acquisitions = seen.iter().find_map(|(key, _, _, value)| {
        let key = key.key();
        let ours = key
            .labels()
            .any(|l| l.key() == "resource" && l.value() == "per-resource");
        (key.name() == metric_names::ACQUIRED && ours).then_some(value)
    });
    assert_eq!(labelled_acquisitions, Some(&DebugValue::Counter(1)));
}

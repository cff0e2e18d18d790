//! The key vectors of tests/vectors/protocol.json, through the public API
//! against a real node: every front checks the same file.

use std::time::Duration;

use fencelock::{Client, ErrorKind, LockOptions, LossReason};
use fencelock_harness::{NodeOptions, RedisNode};
use serde_json::Value;

fn vectors() -> Value {
    serde_json::from_str(include_str!("../../tests/vectors/protocol.json")).expect("valid JSON")
}

fn text(value: &Value) -> &str {
    value.as_str().expect("a string")
}

/// CRC16/XMODEM, as Redis Cluster computes key slots.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |mut crc, &byte| {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
        crc
    })
}

/// The part of `key` Redis Cluster hashes: from the first `{` to the next `}`, if non-empty.
fn hash_tag(key: &str) -> &str {
    key.find('{')
        .and_then(|open| {
            key[open + 1..]
                .find('}')
                .map(|len| &key[open + 1..open + 1 + len])
        })
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key)
}

#[test]
fn key_vectors_are_consistent_and_in_the_protocol_document() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md")).unwrap();
    for vector in vectors()["keys"].as_array().unwrap() {
        let (lock, fence, tag) = (
            text(&vector["lock_key"]),
            text(&vector["fence_key"]),
            text(&vector["hash_tag"]),
        );
        assert_eq!(hash_tag(lock), tag, "{vector}");
        assert_eq!(hash_tag(fence), tag, "lock and counter share a slot: {vector}");
        assert_eq!(
            u64::from(crc16(tag.as_bytes()) % 16384),
            vector["slot"].as_u64().unwrap(),
            "{vector}"
        );
        let prefix = match text(&vector["prefix"]) {
            "" => "(empty)".to_owned(),
            prefix => format!("`{prefix}`"),
        };
        let resource = text(&vector["resource"]);
        let row = format!("| {prefix} | `{resource}`");
        let line = doc
            .lines()
            .find(|line| line.starts_with(&row))
            .unwrap_or_else(|| panic!("docs/protocol.md §2.1 has no row for {row}: document every vector"));
        assert!(
            line.contains(&format!("`{lock}` | `{fence}` | `{tag}` ({})", vector["slot"])),
            "{line}"
        );
    }
}

#[tokio::test]
async fn every_key_vector_is_the_key_the_client_writes() {
    let node = RedisNode::start(&NodeOptions::default());
    for vector in vectors()["keys"].as_array().unwrap() {
        let client = Client::builder()
            .node(node.url())
            .key_prefix(text(&vector["prefix"]))
            .build()
            .await
            .unwrap();
        let lock = client
            .acquire(
                text(&vector["resource"]),
                LockOptions::new(Duration::from_secs(10)),
            )
            .await
            .unwrap();
        let token = match node.command(&["GET", text(&vector["lock_key"])]) {
            redis::Value::BulkString(bytes) => String::from_utf8(bytes).unwrap(),
            other => panic!("no lock key {}: {other:?}", vector["lock_key"]),
        };
        let alphabet = text(&vectors()["token"]["alphabet"]).to_owned();
        assert_eq!(
            token.len() as u64,
            vectors()["token"]["hex_digits"].as_u64().unwrap()
        );
        assert!(token.chars().all(|c| alphabet.contains(c)), "{token}");
        let counter = node.command(&["GET", text(&vector["fence_key"])]);
        assert_eq!(
            counter,
            redis::Value::BulkString(lock.fencing_token().to_string().into_bytes())
        );
        lock.release().await.unwrap();
    }
}

#[tokio::test]
async fn invalid_resource_vectors_are_refused() {
    let node = RedisNode::start(&NodeOptions::default());
    let client = Client::builder().node(node.url()).build().await.unwrap();
    for vector in vectors()["invalid_resources"].as_array().unwrap() {
        let resource = match vector.get("resource") {
            Some(resource) => text(resource).to_owned(),
            None => text(&vector["resource_repeat"]).repeat(vector["times"].as_u64().unwrap() as usize),
        };
        let error = client
            .try_acquire(&resource, LockOptions::new(Duration::from_secs(1)))
            .await
            .expect_err(text(&vector["why"]));
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{}", vector["why"]);
    }
    let longest = "a".repeat(vectors()["limits"]["max_resource_bytes"].as_u64().unwrap() as usize);
    assert!(
        client
            .try_acquire(&longest, LockOptions::new(Duration::from_secs(1)))
            .await
            .unwrap()
            .is_some()
    );
}

/// ACQUIRE returns the counter through Lua doubles: exact up to 2^53 - 1,
/// refused above it rather than handing out a token that could repeat.
#[tokio::test]
async fn fencing_tokens_are_exact_up_to_2_53_and_refused_beyond() {
    let node = RedisNode::start(&NodeOptions::default());
    let client = Client::builder().node(node.url()).build().await.unwrap();
    let max = fencelock::MAX_FENCING_TOKEN;
    assert_eq!(max, (1 << 53) - 1);
    node.command(&["SET", "fencelock:{edge}:fence", &(max - 1).to_string()]);
    let lock = client
        .acquire("edge", LockOptions::new(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(lock.fencing_token(), max);
    lock.release().await.unwrap();

    let error = client
        .try_acquire("edge", LockOptions::new(Duration::from_secs(5)))
        .await
        .expect_err("a counter above 2^53 - 1 is refused");
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert!(error.to_string().contains("2^53"), "{error}");
    // The undo is sent in the background: give it a moment (without blocking
    // this runtime, which drives the connection the undo travels on).
    let mut undone = false;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        undone = node.command(&["EXISTS", "fencelock:{edge}"]) == redis::Value::Int(0);
        if undone {
            break;
        }
    }
    assert!(undone, "the failed grant was undone");
}

/// The shared tables (tests/vectors/protocol.json) are the core's: every
/// front compares its own with the file, so a kind, reason or limit added
/// here without the file fails this test, and one added to the file without
/// a front fails that front's.
#[test]
fn error_kinds_are_the_vectors() {
    let vectors = vectors();
    let listed: Vec<(&str, i64)> = vectors["error_kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|kind| (text(&kind["name"]), kind["code"].as_i64().unwrap()))
        .collect();
    let core: Vec<(&str, i64)> = ErrorKind::ALL
        .iter()
        .map(|kind| (kind.as_str(), i64::from(kind.code())))
        .collect();
    assert_eq!(core, listed);
    for kind in ErrorKind::ALL {
        assert_eq!(ErrorKind::from_name(kind.as_str()), Some(*kind));
    }
}

#[test]
fn loss_reasons_are_the_vectors() {
    let vectors = vectors();
    let listed: Vec<&str> = vectors["loss_reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|reason| text(&reason["name"]))
        .collect();
    let core: Vec<&str> = LossReason::ALL.iter().map(|reason| reason.name()).collect();
    assert_eq!(core, listed);
    for reason in LossReason::ALL {
        assert_eq!(LossReason::from_name(reason.name()), Some(*reason));
    }
}

#[test]
fn log_levels_are_the_vectors() {
    let vectors = vectors();
    let listed: Vec<(&str, u64)> = vectors["log_levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|level| (text(&level["name"]), level["c_value"].as_u64().unwrap()))
        .collect();
    let core: Vec<(&str, u64)> = fencelock::LogLevel::ALL
        .iter()
        .map(|level| (level.name(), u64::from(level.number())))
        .collect();
    assert_eq!(core, listed);
}

#[test]
fn limits_are_the_vectors() {
    let vectors = vectors();
    let limit = |name: &str| {
        vectors["limits"][name]
            .as_u64()
            .unwrap_or_else(|| panic!("limits.{name}"))
    };
    assert_eq!(fencelock::MIN_TTL.as_millis(), u128::from(limit("min_ttl_ms")));
    assert_eq!(fencelock::MAX_TTL.as_millis(), u128::from(limit("max_ttl_ms")));
    assert_eq!(fencelock::MAX_WAIT.as_millis(), u128::from(limit("max_wait_ms")));
    assert_eq!(fencelock::MAX_RESOURCE_LEN as u64, limit("max_resource_bytes"));
    assert_eq!(fencelock::MAX_PREFIX_LEN as u64, limit("max_prefix_bytes"));
    assert_eq!(fencelock::MAX_FENCING_TOKEN, limit("max_fencing_token"));
    assert_eq!(fencelock::MAX_HOLDER_ID, limit("max_holder_id"));
    assert_eq!(
        fencelock::MAX_LEADER_VALUE as u64,
        limit("max_leader_value_bytes")
    );
    assert_eq!(u64::from(fencelock::MAX_PERMITS), limit("max_permits"));
    assert_eq!(
        Some(fencelock::MAX_DRIFT_FACTOR),
        vectors["limits"]["max_drift_factor"].as_f64()
    );
    assert_eq!(
        fencelock::TOKEN_BYTES as u64,
        vectors["token"]["bytes"].as_u64().unwrap()
    );
}

/// The metrics every front reports (design.md §8): the latency buckets and
/// the names the `metrics` facade receives.
#[test]
fn metrics_are_the_vectors() {
    let vectors = vectors();
    let metrics = &vectors["metrics"];
    let buckets: Vec<f64> = metrics["latency_buckets_seconds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_f64().unwrap())
        .collect();
    assert_eq!(buckets, fencelock::LATENCY_BUCKETS);
    let names = &metrics["exported_names"];
    use fencelock::metric_names as n;
    for (field, name) in [
        ("acquired", n::ACQUIRED),
        ("failed", n::FAILED),
        ("lost", n::LOST),
        ("released", n::RELEASED),
        ("renewals", n::RENEWALS),
        ("renewal_failures", n::RENEWAL_FAILURES),
        ("held", n::HELD),
        ("waiting", n::WAITING),
        ("acquire_latency", n::ACQUIRE_LATENCY),
    ] {
        assert_eq!(text(&names[field]), name, "{field}");
    }
    let fields: Vec<&str> = metrics["fields"].as_array().unwrap().iter().map(text).collect();
    assert_eq!(fields.len(), 9);
}

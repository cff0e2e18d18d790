//! T23: property tests on the Rust API's boundaries (resource names, ttl and
//! wait durations, node URLs). Every input gives `Ok` or a documented error
//! kind, never a panic. Seeded: the seed is printed and `FENCELOCK_SEED`
//! replays it. 64 cases per property in CI, 5,000 with `FENCELOCK_LONG=1`.
//! `cargo fuzz` (tests/faults/fuzz) needs a nightly toolchain and cargo-fuzz:
//! `t23_cargo_fuzz_smoke` runs it with `FENCELOCK_LONG=1` when both are
//! present, and otherwise says why it is skipped.

mod faults_support;

use std::time::Duration;

use faults_support::*;
use fencelock::{Client, ErrorKind, LockOptions, MAX_RESOURCE_LEN, MAX_TTL, MAX_WAIT, MIN_TTL};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// A runner with the suite's seed and case count.
fn runner(test: &str) -> TestRunner {
    let seed = seed(test);
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases: scale(test, 64, 5000) as u32,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// Resource names: arbitrary text (braces, NUL, non-ASCII, empty), and
/// lengths around the limit.
fn resources() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[{}\\x00a-z:/]{0,12}",
        (MAX_RESOURCE_LEN - 2..MAX_RESOURCE_LEN + 3).prop_map(|n| "r".repeat(n)),
        (1..400usize).prop_map(|n| "é".repeat(n)), // 2 bytes each: the limit counts bytes
    ]
}

/// Durations from nothing to `Duration::MAX`, with extra weight near the limits.
fn durations() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (0..u64::MAX, 0..1_000_000_000u32).prop_map(|(s, n)| Duration::new(s, n)),
        (0..100_000u64).prop_map(Duration::from_millis),
        Just(Duration::ZERO),
        Just(Duration::MAX),
        Just(MIN_TTL - Duration::from_nanos(1)),
        Just(MAX_TTL + Duration::from_nanos(1)),
    ]
}

fn is_valid_resource(resource: &str) -> bool {
    !resource.is_empty() && resource.len() <= MAX_RESOURCE_LEN && !resource.starts_with('}')
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t23_acquire_takes_any_resource_ttl_and_wait_without_panicking() {
    let node = RedisNode::start(&NodeOptions::default());
    let client = builder_for([node.url()]).build().await.unwrap();
    let handle = tokio::runtime::Handle::current();
    let strategy = (resources(), durations(), durations());
    tokio::task::block_in_place(|| {
        runner("t23_acquire_takes_any_resource_ttl_and_wait_without_panicking")
            .run(&strategy, |(resource, ttl, wait)| {
                // Short waits only: the lock is free, so a valid call returns at once.
                let wait = wait.min(ms(50));
                let result = handle.block_on(client.acquire(&resource, LockOptions::new(ttl).wait(wait)));
                let valid = is_valid_resource(&resource) && (MIN_TTL..=MAX_TTL).contains(&ttl);
                match result {
                    Ok(lock) => {
                        prop_assert!(valid, "accepted {resource:?} with ttl {ttl:?}");
                        prop_assert_eq!(lock.resource(), resource.as_str());
                        handle.block_on(lock.release()).unwrap();
                    }
                    Err(err) => {
                        prop_assert!(!valid, "refused valid input {resource:?}, {ttl:?}: {err}");
                        prop_assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{}", err);
                    }
                }
                Ok(())
            })
            .unwrap();
    });
    let _ = MAX_WAIT; // waits beyond MAX_WAIT: covered by the unit test in options.rs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t23_extend_takes_any_ttl_without_panicking() {
    let node = RedisNode::start(&NodeOptions::default());
    let client = builder_for([node.url()]).build().await.unwrap();
    let lock = client
        .acquire("t23:extend", LockOptions::new(ms(5000)))
        .await
        .unwrap();
    let handle = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| {
        runner("t23_extend_takes_any_ttl_without_panicking")
            .run(&durations(), |ttl| {
                let valid = (MIN_TTL..=MAX_TTL).contains(&ttl);
                match handle.block_on(lock.extend(ttl)) {
                    Ok(()) => prop_assert!(valid, "extended with {ttl:?}"),
                    Err(err) => {
                        prop_assert!(!valid, "refused {ttl:?}: {err}");
                        prop_assert_eq!(err.kind(), ErrorKind::InvalidArgument);
                    }
                }
                // Keep the lock alive for the next case whatever this one did.
                handle.block_on(lock.extend(ms(5000))).unwrap();
                Ok(())
            })
            .unwrap();
    });
}

/// URLs built from pieces: schemes, user info, hosts and ports, paths. Only
/// loopback hosts on a closed port are ever contacted (this machine may
/// send nothing elsewhere); any other parseable host is skipped.
fn urls(closed_port: u16) -> impl Strategy<Value = String> {
    let scheme = prop_oneof![
        Just("redis".to_owned()),
        Just("rediss".to_owned()),
        Just("redis+cluster".to_owned()),
        Just("http".to_owned()),
        Just("".to_owned()),
        Just("REDIS".to_owned())
    ];
    let user = prop_oneof![
        Just("".to_owned()),
        Just("u:p@".to_owned()),
        Just(":@".to_owned()),
        Just("us%zzer:pa:ss@".to_owned()),
        "[a-z:%]{0,6}@"
    ];
    let host = prop_oneof![
        Just("127.0.0.1".to_owned()),
        Just("localhost".to_owned()),
        Just("[::1]".to_owned()),
        Just("".to_owned()),
        Just("[::1".to_owned()),
        Just("127.0.0.1.".to_owned())
    ];
    let port = prop_oneof![
        Just(format!(":{closed_port}")),
        Just(":0".to_owned()),
        Just(":65536".to_owned()),
        Just(":-1".to_owned()),
        Just(":".to_owned()),
        "(:[0-9]{1,7})?",
    ];
    let path = prop_oneof![
        Just("".to_owned()),
        Just("/0".to_owned()),
        Just("/15".to_owned()),
        Just("/-1".to_owned()),
        Just("/x".to_owned()),
        "(/[0-9a-z?#%]{0,5})?"
    ];
    prop_oneof![
        4 => (scheme, user, host, port, path).prop_map(|(s, u, h, p, d)| format!("{s}://{u}{h}{p}{d}")),
        1 => any::<String>(),
    ]
}

/// True when building a client for `url` could only ever connect to our closed loopback port.
fn safe_to_connect(url: &str, closed_port: u16) -> bool {
    match url::Url::parse(url) {
        Err(_) => true, // refused before any connection
        Ok(parsed) => match parsed.host_str() {
            None | Some("") => true,
            Some(host) => {
                matches!(host, "127.0.0.1" | "localhost" | "[::1]")
                    && parsed.port().is_none_or(|p| p == closed_port || p == 0)
                    && parsed.port().is_some()
            }
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t23_any_node_url_is_accepted_or_refused_with_a_config_error() {
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let handle = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| {
        runner("t23_any_node_url_is_accepted_or_refused_with_a_config_error")
            .run(&urls(closed_port), |url| {
                prop_assume!(safe_to_connect(&url, closed_port));
                let built = handle.block_on(
                    Client::builder()
                        .node(url.clone())
                        .node_timeout(ms(50))
                        .connect_timeout(ms(100))
                        .build(),
                );
                if let Err(err) = built {
                    prop_assert!(
                        matches!(err.kind(), ErrorKind::Config | ErrorKind::Tls),
                        "{url:?}: {:?}",
                        err.kind()
                    );
                    prop_assert!(!err.to_string().contains("pa:ss"), "password in {err}");
                }
                Ok(())
            })
            .unwrap();
    });
}

/// T23 `cargo fuzz`: a 60 s smoke per target (tests/faults/fuzz/run.sh),
/// only with `FENCELOCK_LONG=1` (two minutes plus a nightly sanitizer build
/// do not fit the CI budget). Says why when it does not run.
#[test]
fn t23_cargo_fuzz_smoke() {
    let run_sh = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/faults/fuzz/run.sh");
    if let Some(missing) = missing_fuzz_tools() {
        eprintln!("t23_cargo_fuzz_smoke: SKIPPED, {missing}");
        return;
    }
    if !long_run() {
        eprintln!(
            "t23_cargo_fuzz_smoke: SKIPPED in CI (60 s per target); FENCELOCK_LONG=1 or {run_sh} runs it"
        );
        return;
    }
    let status = std::process::Command::new(run_sh)
        .arg("60")
        .status()
        .expect("run the fuzz smoke");
    assert!(
        status.success(),
        "cargo fuzz found a crash (see tests/faults/fuzz/artifacts)"
    );
}

/// Why `cargo fuzz` cannot run here, if it cannot.
fn missing_fuzz_tools() -> Option<&'static str> {
    let works = |args: &[&str]| {
        std::process::Command::new(args[0])
            .args(&args[1..])
            .output()
            .is_ok_and(|out| out.status.success())
    };
    if !works(&["cargo", "+nightly", "--version"]) {
        Some("no nightly toolchain (cargo fuzz needs one)")
    } else if !works(&["cargo", "+nightly", "fuzz", "--version"]) {
        Some("cargo-fuzz is not installed (cargo install cargo-fuzz)")
    } else {
        None
    }
}

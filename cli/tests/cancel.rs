//! Issue #15, item 4 (the CLI part): `fencelock run` never exits with its own
//! key, or an abandoned attempt's key, left on a node it could reach.

mod common;

use std::time::Duration;

use common::{code, eventually, finish, key_exists, spawn, text};
use fencelock_harness::{FaultProxy, Mode, NodeOptions, RedisNode};

/// A signal lands while the granting reply is on its way back: the node has
/// the attempt's key, fencelock has not seen the grant. Every request and
/// reply through the proxy takes 300 ms each way, so the window is wide and
/// the test deterministic: fencelock is signalled as soon as the key appears.
#[test]
fn a_signal_during_the_grant_leaves_no_key_behind() {
    let node = RedisNode::start(&NodeOptions::default());
    let proxy = FaultProxy::start(node.port());
    proxy.set(Mode::Delay {
        each_way: Duration::from_millis(300),
        jitter: Duration::ZERO,
    });
    for (signal, name) in [(libc::SIGINT, "INT"), (libc::SIGTERM, "TERM")] {
        let resource = format!("grant-race-{name}");
        let mut command = common::bare_fencelock();
        command
            .args([
                "--node",
                &proxy.url(),
                "--node-timeout",
                "5s",
                "--connect-timeout",
                "5s",
            ])
            .args(["run", "--wait", "0", &resource, "--", "echo", "ran"]);
        let child = spawn(&mut command);
        assert!(
            eventually(Duration::from_secs(20), || key_exists(&node, &resource)),
            "{name}: the attempt never reached the node"
        );
        // SAFETY: kill(2) on the PID of a child we spawned and have not reaped.
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = finish(child);
        assert_eq!(code(&out), 128 + signal, "{name}: {}", text(&out.stderr));
        assert!(!text(&out.stdout).contains("ran"), "{name}: the command ran");
        assert!(
            !key_exists(&node, &resource),
            "{name}: fencelock exited with its attempt's key still on the node"
        );
    }
}

/// A Redlock attempt that one node granted but a majority refused is undone
/// on that node before fencelock exits with "not acquired".
#[test]
fn a_refused_attempt_is_undone_before_exit() {
    let nodes = RedisNode::start_many(3, &NodeOptions::default());
    for round in 0..5 {
        let resource = format!("refused-{round}");
        let key = format!("fencelock:{{{resource}}}");
        // Another owner on two of the three nodes: the attempt can only win the first.
        for node in &nodes[1..] {
            node.command(&["SET", &key, "someone-else", "PX", "30000"]);
        }
        let mut command = common::bare_fencelock();
        for node in &nodes {
            command.arg("--node").arg(node.url());
        }
        let out = command
            .args([
                "--node-timeout",
                "5s",
                "run",
                "--wait",
                "0",
                &resource,
                "--",
                "true",
            ])
            .output()
            .expect("run fencelock");
        assert_eq!(code(&out), 75, "{}", text(&out.stderr));
        assert!(
            !key_exists(&nodes[0], &resource),
            "round {round}: fencelock exited with a refused attempt's key on the node that granted it"
        );
    }
}

//! `fencelock run` and `fencelock status` as a user runs them: the real
//! binary against real redis-server nodes.

mod common;

use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use common::{code, finish, key_exists, spawn, text};
use fencelock::{ClientBuilder, LockOptions, blocking};
use fencelock_harness::{NodeOptions, RedisNode};

fn start_nodes(n: usize) -> Vec<RedisNode> {
    RedisNode::start_many(n, &NodeOptions::default())
}

/// `fencelock --node URL… ARGS…`, with no FENCELOCK_* variables inherited.
fn fencelock(nodes: &[RedisNode], args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fencelock"));
    command
        .env_remove("FENCELOCK_NODES")
        .env_remove("FENCELOCK_PASSWORD");
    for node in nodes {
        command.arg("--node").arg(node.url());
    }
    command.args(args);
    command
}

fn output(nodes: &[RedisNode], args: &[&str]) -> Output {
    fencelock(nodes, args).output().expect("run fencelock")
}

/// Takes a lock on every node, not just a quorum; use the returned lock's
/// `resource()`. Acquire returns once a majority granted, and the last grant
/// can land later, or never (a request not yet sent when the quorum decided
/// is dropped): wait for it, and in the rare case it does not come, start
/// over on a fresh resource name (fresh, so every node's fencing counter
/// still matches the token). A generous per-node timeout keeps a busy CI
/// machine from dropping an answer.
fn hold(nodes: &[RedisNode], resource: &str) -> blocking::Lock {
    let client = blocking::Client::connect(
        ClientBuilder::default()
            .nodes(nodes.iter().map(RedisNode::url))
            .node_timeout(Duration::from_secs(5)),
    )
    .expect("connect");
    for attempt in 0..5 {
        let name = match attempt {
            0 => resource.to_owned(),
            n => format!("{resource}-{n}"),
        };
        let lock = client
            .acquire(
                &name,
                LockOptions::new(Duration::from_secs(30)).wait(Duration::ZERO),
            )
            .expect("acquire");
        if nodes
            .iter()
            .all(|node| held_within(node, &name, Duration::from_secs(5)))
        {
            return lock;
        }
        lock.release().expect("release");
    }
    panic!("no acquire of {resource} reached every node in 5 tries");
}

/// Whether `resource` is held on `node` within `limit` (polled).
fn held_within(node: &RedisNode, resource: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !key_exists(node, resource) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A shell loop that sets `trap` and then creates a marker file, and the
/// marker's path: wait for it with [`wait_for_trap`] before signalling, as
/// a signal that comes before the trap kills the shell by default.
fn trapping_command(trap: &str, name: &str) -> (String, std::path::PathBuf) {
    let ready = std::env::temp_dir().join(format!("fencelock-cli-trap-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&ready);
    let script = format!(
        "{trap}; touch '{}'; while :; do sleep 0.05; done",
        ready.display()
    );
    (script, ready)
}

/// Waits (generously) until the command of [`trapping_command`] set its trap.
fn wait_for_trap(ready: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "the command never set its trap");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_file(ready);
}

/// Waits (generously) until `fencelock run` holds the lock.
fn wait_until_held(node: &RedisNode, resource: &str) {
    assert!(
        held_within(node, resource, Duration::from_secs(20)),
        "fencelock never took the lock on {resource}"
    );
}

/// Waits for a child, killing it (and failing) if it hangs.
#[test]
fn exit_codes_follow_the_documented_table() {
    let nodes = start_nodes(1);
    assert_eq!(code(&output(&nodes, &["run", "codes", "--", "true"])), 0);
    assert_eq!(
        code(&output(&nodes, &["run", "codes", "--", "sh", "-c", "exit 7"])),
        7
    );
    assert_eq!(
        code(&output(&nodes, &["run", "codes", "--", "sh", "-c", "kill -9 $$"])),
        128 + 9
    );
    assert_eq!(
        code(&output(&nodes, &["run", "codes", "--", "/nonexistent/command"])),
        127
    );
    // A file without execute permission (rather than some system file, whose
    // mode varies between machines).
    let not_executable = std::env::temp_dir().join(format!("fencelock-cli-noexec-{}", std::process::id()));
    std::fs::write(&not_executable, "echo ran\n").unwrap();
    std::fs::set_permissions(
        &not_executable,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let cannot = output(&nodes, &["run", "codes", "--", not_executable.to_str().unwrap()]);
    let _ = std::fs::remove_file(&not_executable);
    assert_eq!(code(&cannot), 126, "{}", text(&cannot.stderr));

    let held = hold(&nodes, "codes-held");
    // One try: a generous node timeout, so a slow answer on a busy machine is
    // not reported as "unavailable" (69) instead of "held" (75).
    let busy = output(
        &nodes,
        &[
            "--node-timeout",
            "5s",
            "run",
            "--wait",
            "0",
            held.resource(),
            "--",
            "true",
        ],
    );
    assert_eq!(code(&busy), 75, "{}", text(&busy.stderr));
    assert!(
        text(&busy.stderr).contains("another owner"),
        "{}",
        text(&busy.stderr)
    );
    let waited = output(&nodes, &["run", "--wait", "200ms", held.resource(), "--", "true"]);
    assert_eq!(code(&waited), 75, "{}", text(&waited.stderr));

    // Arguments and configuration: 2, with a message.
    let no_node = output(&[], &["run", "codes", "--", "true"]);
    assert_eq!(code(&no_node), 2);
    assert!(
        text(&no_node.stderr).contains("FENCELOCK_NODES"),
        "{}",
        text(&no_node.stderr)
    );
    let mut bad_url = Command::new(env!("CARGO_BIN_EXE_fencelock"));
    bad_url
        .env_remove("FENCELOCK_NODES")
        .args(["--node", "http://nope", "run", "x", "--", "true"]);
    assert_eq!(code(&bad_url.output().unwrap()), 2);
    assert_eq!(
        code(&output(&nodes, &["run", "--ttl", "0s", "codes", "--", "true"])),
        2
    );
    assert_eq!(
        code(&output(&nodes, &["run", "--ttl", "soon", "codes", "--", "true"])),
        2
    );
    assert_eq!(code(&output(&nodes, &["run", "codes"])), 2);
    // The runtime's worker count is a setting of every front: a bad one is a
    // configuration error naming the variable; a good one runs as usual.
    let bad_workers = fencelock(&nodes, &["run", "codes", "--", "true"])
        .env(fencelock::WORKER_THREADS_ENV, "0")
        .output()
        .unwrap();
    assert_eq!(code(&bad_workers), 2);
    assert!(
        text(&bad_workers.stderr).contains(fencelock::WORKER_THREADS_ENV),
        "{}",
        text(&bad_workers.stderr)
    );
    let two_workers = fencelock(&nodes, &["run", "codes", "--", "true"])
        .env(fencelock::WORKER_THREADS_ENV, "2")
        .output()
        .unwrap();
    assert_eq!(code(&two_workers), 0, "{}", text(&two_workers.stderr));
    assert_eq!(code(&output(&nodes, &["run", "", "--", "true"])), 2);
    let old_tls = output(
        &nodes,
        &["--tls-min-version", "1.1", "run", "codes", "--", "true"],
    );
    assert_eq!(code(&old_tls), 2);
    assert!(text(&old_tls.stderr).contains("1.3"), "{}", text(&old_tls.stderr));
    // A TLS minimum above 1.2 on a Redis Cluster node: a configuration error.
    let cluster = output(
        &[],
        &[
            "--node",
            "rediss+cluster://127.0.0.1:1",
            "--tls-min-version",
            "1.3",
            "run",
            "codes",
            "--",
            "true",
        ],
    );
    assert_eq!(code(&cluster), 2, "{}", text(&cluster.stderr));
    assert!(
        text(&cluster.stderr).contains("tls-protocols"),
        "{}",
        text(&cluster.stderr)
    );

    // Nobody listening: Redis unavailable.
    let dead = start_nodes(1);
    dead[0].kill();
    let unavailable = output(&dead, &["run", "codes", "--", "true"]);
    assert_eq!(code(&unavailable), 69, "{}", text(&unavailable.stderr));
}

#[test]
fn the_command_sees_its_resource_and_fencing_token() {
    let nodes = start_nodes(1);
    let run = output(
        &nodes,
        &[
            "run",
            "env-check",
            "--",
            "sh",
            "-c",
            "echo \"$FENCELOCK_RESOURCE $FENCELOCK_TOKEN $FENCELOCK_FENCE\"",
        ],
    );
    assert_eq!(code(&run), 0, "{}", text(&run.stderr));
    let counter = nodes[0].command(&["GET", "fencelock:{env-check}:fence"]);
    let redis::Value::BulkString(counter) = counter else {
        panic!("no fencing counter: {counter:?}")
    };
    let out = text(&run.stdout);
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(words[..2], ["env-check", text(&counter).as_str()], "{out}");
    // FENCELOCK_FENCE is token:holder, the same token with this grant's holder id.
    let fence: fencelock::Fence = words[2].parse().expect("FENCELOCK_FENCE parses as a fence");
    assert_eq!(fence.token.to_string(), words[1]);
    assert!(fence.holder >= 1, "{out}");
    assert!(
        !key_exists(&nodes[0], "env-check"),
        "released after the command exited"
    );
}

#[test]
fn a_lost_lock_stops_the_command_with_sigterm() {
    let nodes = start_nodes(1);
    let (script, ready) = trapping_command("trap 'echo got TERM; exit 0' TERM", "lose");
    let child = spawn(&mut fencelock(
        &nodes,
        &["run", "--ttl", "300ms", "lose", "--", "sh", "-c", &script],
    ));
    wait_until_held(&nodes[0], "lose");
    wait_for_trap(&ready);
    nodes[0].command(&["DEL", "fencelock:{lose}"]);
    let out = finish(child);
    assert_eq!(code(&out), 76, "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("got TERM"));
    assert!(
        text(&out.stderr).contains("lost the lock 'lose'"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_command_ignoring_sigterm_is_killed_after_the_grace_period() {
    let nodes = start_nodes(1);
    let (script, ready) = trapping_command("trap '' TERM", "stubborn");
    let args = [
        "run", "--ttl", "300ms", "--grace", "300ms", "stubborn", "--", "sh", "-c", &script,
    ];
    let child = spawn(&mut fencelock(&nodes, &args));
    wait_until_held(&nodes[0], "stubborn");
    wait_for_trap(&ready);
    nodes[0].command(&["DEL", "fencelock:{stubborn}"]);
    let out = finish(child);
    assert_eq!(code(&out), 76, "{}", text(&out.stderr));
}

#[test]
fn signals_are_forwarded_and_the_lock_released_after_the_command_exits() {
    let nodes = start_nodes(1);
    for (signal, name, exit) in [
        (libc::SIGINT, "INT", 3),
        (libc::SIGTERM, "TERM", 4),
        (libc::SIGHUP, "HUP", 5),
        (libc::SIGQUIT, "QUIT", 6),
        (libc::SIGUSR1, "USR1", 8),
        (libc::SIGUSR2, "USR2", 9),
    ] {
        let resource = format!("forward-{name}");
        let (script, ready) = trapping_command(&format!("trap 'echo got {name}; exit {exit}' {name}"), name);
        let child = spawn(&mut fencelock(
            &nodes,
            &["run", &resource, "--", "sh", "-c", &script],
        ));
        wait_until_held(&nodes[0], &resource);
        wait_for_trap(&ready);
        // SAFETY: kill(2) on the PID of a child we spawned and have not reaped.
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = finish(child);
        assert_eq!(code(&out), exit, "{name}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains(&format!("got {name}")));
        assert!(!key_exists(&nodes[0], &resource), "{name}: the lock was released");
    }

    // While waiting for a held lock: the wait ends with 128+N, nothing runs,
    // and the holder's key is left alone.
    let held = hold(&nodes, "forward-waiting");
    for (signal, name) in [
        (libc::SIGINT, "INT"),
        (libc::SIGTERM, "TERM"),
        (libc::SIGHUP, "HUP"),
        (libc::SIGQUIT, "QUIT"),
    ] {
        let before = acquire_attempts(&nodes[0]);
        let child = spawn(&mut fencelock(
            &nodes,
            &["run", "--wait", "20s", held.resource(), "--", "echo", "ran"],
        ));
        // Signals are caught before the first attempt: once one reached the
        // node, the signal cannot kill fencelock outright.
        let deadline = Instant::now() + Duration::from_secs(20);
        while acquire_attempts(&nodes[0]) == before {
            assert!(
                Instant::now() < deadline,
                "{name}: fencelock never tried to acquire"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: kill(2) on the PID of a child we spawned and have not reaped.
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = finish(child);
        assert_eq!(code(&out), 128 + signal, "{name}: {}", text(&out.stderr));
        assert!(!text(&out.stdout).contains("ran"), "{name}: the command ran");
        assert!(
            text(&out.stderr).contains("while waiting"),
            "{}",
            text(&out.stderr)
        );
        assert!(held.is_held(), "{name}: the holder's lock was touched");
    }
}

/// How many scripts the node has run: every acquire attempt is one.
fn queue_length(node: &RedisNode, resource: &str) -> i64 {
    match node.command(&["ZCARD", &format!("fencelock:{{{resource}}}:queue")]) {
        redis::Value::Int(n) => n,
        other => panic!("unexpected ZCARD reply {other:?}"),
    }
}

/// `run --fair`: runs wait in line in order of arrival, and a fair run does
/// not take a free lock while a live waiter is ahead of it.
#[test]
fn fair_runs_wait_in_line() {
    let nodes = start_nodes(1);
    let held = hold(&nodes, "fair-line");
    let resource = held.resource().to_owned();
    let log = std::env::temp_dir().join(format!("fencelock-cli-fair-{}", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let runs: Vec<Child> = ["first", "second", "third"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let script = format!("echo {name} >> {}", log.display());
            let args = [
                "run", "--fair", "--wait", "20s", &resource, "--", "sh", "-c", &script,
            ];
            let run = spawn(&mut fencelock(&nodes, &args));
            let queued = common::eventually(Duration::from_secs(20), || {
                queue_length(&nodes[0], &resource) == i as i64 + 1
            });
            assert!(queued, "run {name} never got in line");
            run
        })
        .collect();
    held.release().unwrap();
    for run in runs {
        let out = finish(run);
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    }
    let order = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert_eq!(order, "first\nsecond\nthird\n");

    // A live waiter ahead in line (a long lease): the lock is free, yet a
    // fair run is refused and a default one runs.
    let waiter = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1";
    nodes[0].command(&["ZADD", &format!("fencelock:{{{resource}}}:queue"), "1", waiter]);
    let leases = format!("fencelock:{{{resource}}}:leases");
    nodes[0].command(&["ZADD", &leases, "99999999999999", waiter]);
    let refused = output(&nodes, &["run", "--fair", &resource, "--", "true"]);
    assert_eq!(code(&refused), 75, "{}", text(&refused.stderr));
    assert!(
        text(&refused.stderr).contains("ahead in line"),
        "{}",
        text(&refused.stderr)
    );
    let barged = output(&nodes, &["run", &resource, "--", "true"]);
    assert_eq!(code(&barged), 0, "{}", text(&barged.stderr));
}

fn acquire_attempts(node: &RedisNode) -> u64 {
    let redis::Value::BulkString(info) = node.command(&["INFO", "commandstats"]) else {
        panic!("INFO commandstats");
    };
    let info = text(&info);
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

#[test]
fn concurrent_runs_never_overlap_and_tokens_rise() {
    let nodes = start_nodes(1);
    let log = std::env::temp_dir().join(format!("fencelock-cli-overlap-{}", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let script = format!(
        "echo \"start $FENCELOCK_TOKEN\" >> {0}; sleep 0.1; echo \"end $FENCELOCK_TOKEN\" >> {0}",
        log.display()
    );
    let runs: Vec<Child> = (0..4)
        .map(|_| {
            spawn(&mut fencelock(
                &nodes,
                &["run", "--wait", "20s", "overlap", "--", "sh", "-c", &script],
            ))
        })
        .collect();
    for run in runs {
        let out = finish(run);
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    }
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let _ = std::fs::remove_file(&log);
    assert_eq!(lines.len(), 8, "{lines:?}");
    let mut last_token = 0;
    for pair in lines.chunks(2) {
        let start: u64 = pair[0]
            .strip_prefix("start ")
            .expect("a start line first")
            .parse()
            .unwrap();
        let end: u64 = pair[1]
            .strip_prefix("end ")
            .expect("then its end line")
            .parse()
            .unwrap();
        assert_eq!(start, end, "critical sections interleaved: {lines:?}");
        assert!(start > last_token, "tokens must rise: {lines:?}");
        last_token = start;
    }
}

#[test]
fn status_shows_each_node_but_never_the_owners_token() {
    let nodes = start_nodes(3);
    let urls: Vec<String> = nodes.iter().map(RedisNode::url).collect();
    let status = |resource: &str, json: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fencelock"));
        command
            .env("FENCELOCK_NODES", urls.join(","))
            // Generous, so a busy machine does not turn a slow answer into an error row.
            .args(["--node-timeout", "5s"])
            .arg("status")
            .arg(resource);
        if json {
            command.arg("--json");
        }
        command.output().expect("run fencelock status")
    };
    let free = status("report", false);
    assert_eq!(code(&free), 0);
    assert!(text(&free.stdout).contains("free"), "{}", text(&free.stdout));

    let lock = hold(&nodes, "report");
    let resource = lock.resource();
    let owner_token = match nodes[0].command(&["GET", &format!("fencelock:{{{resource}}}")]) {
        redis::Value::BulkString(bytes) => text(&bytes),
        other => panic!("{other:?}"),
    };
    let table = status(resource, false);
    assert!(text(&table.stdout).contains("HELD"), "{}", text(&table.stdout));
    assert!(text(&table.stdout).contains(&lock.fencing_token().to_string()));
    let json = status(resource, true);
    assert!(!text(&json.stdout).contains(&owner_token) && !text(&table.stdout).contains(&owner_token));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("valid JSON");
    assert_eq!(report["held"], true);
    assert_eq!(report["quorum"], 2);
    let rows = report["nodes"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        assert_eq!(row["held"], true);
        assert_eq!(row["fencing_counter"], lock.fencing_token());
        assert!(row["ttl_ms"].as_u64().unwrap() <= 30_000);
    }

    nodes[0].kill();
    let degraded = status(resource, true);
    assert_eq!(code(&degraded), 0, "a quorum still answers");
    let report: serde_json::Value = serde_json::from_slice(&degraded.stdout).unwrap();
    assert!(report["nodes"][0]["error"].is_string());
    nodes[1].kill();
    assert_eq!(code(&status(resource, false)), 69, "fewer than a quorum answered");
}

#[test]
fn a_node_without_aof_is_warned_about_and_refused_with_require_aof() {
    let nodes = start_nodes(1);
    let warned = output(&nodes, &["run", "aof-check", "--", "true"]);
    assert_eq!(code(&warned), 0, "{}", text(&warned.stderr));
    assert!(
        text(&warned.stderr).contains("without AOF"),
        "no warning: {}",
        text(&warned.stderr)
    );
    let refused = output(&nodes, &["--require-aof", "run", "aof-check", "--", "true"]);
    assert_eq!(code(&refused), 2, "{}", text(&refused.stderr));
    assert!(
        text(&refused.stderr).contains("appendonly"),
        "{}",
        text(&refused.stderr)
    );
    let durable = RedisNode::start_many(
        1,
        &NodeOptions {
            aof: true,
            ..NodeOptions::default()
        },
    );
    let accepted = output(&durable, &["--require-aof", "run", "aof-check", "--", "true"]);
    assert_eq!(code(&accepted), 0, "{}", text(&accepted.stderr));
    assert_eq!(text(&accepted.stderr), "", "nothing to warn about");
}

/// Reads a child's stdout lines on a thread, so a test can wait for them with a limit.
fn lines_of(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("stdout piped");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    receiver
}

/// `elect` and `observe`: a leader killed with SIGKILL is replaced within
/// its ttl and a bound, by a candidate with a larger epoch, and an observer
/// prints each leader.
#[test]
fn a_killed_leader_is_replaced_and_observers_see_it() {
    let nodes = start_nodes(1);
    let log = std::env::temp_dir().join(format!("fencelock-cli-elect-{}", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let leader_script = format!("echo \"A $FENCELOCK_TOKEN\" >> {}; exec sleep 60", log.display());
    let mut first = spawn(&mut fencelock(
        &nodes,
        &[
            "elect",
            "--ttl",
            "1s",
            "--value",
            "host-a",
            "jobs",
            "--",
            "sh",
            "-c",
            &leader_script,
        ],
    ));
    let led = common::eventually(Duration::from_secs(20), || {
        std::fs::read_to_string(&log).is_ok_and(|text| text.starts_with("A "))
    });
    assert!(led, "the first candidate never led");
    let mut observer = spawn(&mut fencelock(&nodes, &["observe", "jobs"]));
    let seen = lines_of(&mut observer);
    let line = seen
        .recv_timeout(Duration::from_secs(10))
        .expect("observe printed nothing");
    let first_epoch: u64 = line
        .strip_suffix(" host-a")
        .expect("EPOCH VALUE")
        .parse()
        .unwrap();

    let follower_script = format!("echo \"B $FENCELOCK_TOKEN\" >> {}", log.display());
    let second = spawn(&mut fencelock(
        &nodes,
        &[
            "elect",
            "--ttl",
            "5s",
            "--value",
            "host-b",
            "jobs",
            "--",
            "sh",
            "-c",
            &follower_script,
        ],
    ));
    let in_line = common::eventually(Duration::from_secs(20), || queue_length(&nodes[0], "jobs") == 1);
    assert!(in_line, "the second candidate never got in line");
    let killed = Instant::now();
    common::signal(first.id() as i32, libc::SIGKILL);
    let out = finish(second);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    // The dead leader's lease (1 s) ran out, then the waiter's bound.
    assert!(
        killed.elapsed() < Duration::from_millis(2_500),
        "took {:?}",
        killed.elapsed()
    );
    let _ = first.wait();
    let text_log = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let epochs: Vec<(&str, u64)> = text_log
        .lines()
        .map(|line| {
            let (who, epoch) = line.split_once(' ').unwrap();
            (who, epoch.parse().unwrap())
        })
        .collect();
    assert_eq!(epochs.len(), 2, "{text_log}");
    assert_eq!(epochs[0], ("A", first_epoch));
    assert!(epochs[1].0 == "B" && epochs[1].1 > first_epoch, "{text_log}");
    let line = seen
        .recv_timeout(Duration::from_secs(10))
        .expect("observe missed the new leader");
    assert_eq!(line, format!("{} host-b", epochs[1].1));
    let _ = observer.kill();
    let _ = observer.wait();
}

/// `run --permits N`: up to N commands of one semaphore run at once, never
/// more, each told its permit; a run that disagrees on N is refused.
#[test]
fn runs_with_permits_share_a_semaphore() {
    let nodes = start_nodes(1);
    let dir = std::env::temp_dir().join(format!("fencelock-cli-permits-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Each run records itself as inside while it sleeps; the most files
    // present at once is the concurrency the semaphore allowed.
    let script = format!(
        "f={dir}/$$; echo $FENCELOCK_PERMIT > $f; n=$(ls {dir} | wc -l); echo $n >> {dir}.peak; sleep 0.3; rm $f",
        dir = dir.display()
    );
    let runs: Vec<Child> = (0..5)
        .map(|_| {
            let args = [
                "run",
                "--permits",
                "2",
                "--wait",
                "20s",
                "jobs",
                "--",
                "sh",
                "-c",
                &script,
            ];
            spawn(&mut fencelock(&nodes, &args))
        })
        .collect();
    for run in runs {
        let out = finish(run);
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    }
    let peaks = std::fs::read_to_string(format!("{}.peak", dir.display())).unwrap();
    let _ = std::fs::remove_file(format!("{}.peak", dir.display()));
    let _ = std::fs::remove_dir_all(&dir);
    let peak = peaks
        .lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
        .max()
        .unwrap();
    assert_eq!(peaks.lines().count(), 5, "every run ran: {peaks}");
    assert!(peak <= 2, "{peak} runs at once with 2 permits");
    let held = fencelock(&nodes, &["run", "--permits", "2", "jobs", "--", "sleep", "2"])
        .spawn()
        .unwrap();
    let busy = common::eventually(Duration::from_secs(10), || {
        matches!(
            nodes[0].command(&["EXISTS", "fencelock:{jobs}:sem:0", "fencelock:{jobs}:sem:1"]),
            redis::Value::Int(1)
        )
    });
    assert!(busy, "the sleeping run never took a permit");
    let mismatch = output(&nodes, &["run", "--permits", "3", "jobs", "--", "true"]);
    assert_eq!(code(&mismatch), 2, "{}", text(&mismatch.stderr));
    assert!(
        text(&mismatch.stderr).contains("has 2 permits"),
        "{}",
        text(&mismatch.stderr)
    );
    let out = finish(held);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let zero = output(&nodes, &["run", "--permits", "0", "jobs", "--", "true"]);
    assert_eq!(code(&zero), 2, "{}", text(&zero.stderr));
}

/// `run --read` / `run --write`: readers run together, a writer alone.
#[test]
fn read_and_write_runs_share_a_read_write_lock() {
    let nodes = start_nodes(1);
    let dir = std::env::temp_dir().join(format!("fencelock-cli-rw-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = format!("{}.log", dir.display());
    let _ = std::fs::remove_file(&log);
    // Each run notes who else is inside as it enters: "<mode> <others inside>".
    let script = |mode: &str| {
        format!(
            "f={dir}/{mode}-$$; n=$(ls {dir} | tr '\\n' ' '); echo \"{mode} $n\" >> {log}; touch $f; sleep 0.3; rm $f",
            dir = dir.display()
        )
    };
    let mut runs = Vec::new();
    for mode in ["read", "read", "write", "read", "write", "read"] {
        let flag = format!("--{mode}");
        let command = script(mode);
        let args = [
            "run",
            flag.as_str(),
            "--wait",
            "20s",
            "doc",
            "--",
            "sh",
            "-c",
            command.as_str(),
        ];
        runs.push(spawn(&mut fencelock(&nodes, &args)));
    }
    for run in runs {
        let out = finish(run);
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    }
    let entries = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(entries.lines().count(), 6, "{entries}");
    for line in entries.lines() {
        let (mode, others) = line.split_once(' ').unwrap();
        match mode {
            "write" => assert!(others.trim().is_empty(), "a writer entered beside {others}"),
            _ => assert!(
                !others.contains("write"),
                "a reader entered beside a writer: {line}"
            ),
        }
    }
    let both = output(&nodes, &["run", "--read", "--write", "doc", "--", "true"]);
    assert_eq!(code(&both), 2, "{}", text(&both.stderr));
}

/// `run --metrics-addr 127.0.0.1:0`: the address is printed, and a real
/// HTTP client scraping it while the command runs reads the Prometheus
/// text with this run's acquisition and the lock held; anything but
/// /metrics is a 404.
#[test]
fn run_serves_its_metrics_while_it_runs() {
    use std::io::{BufRead, BufReader};
    let nodes = start_nodes(1);
    let mut run = fencelock(
        &nodes,
        &[
            "run",
            "--metrics-addr",
            "127.0.0.1:0",
            "scraped",
            "--",
            "sleep",
            "3",
        ],
    )
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("run fencelock");
    let stderr = BufReader::new(run.stderr.take().unwrap());
    let mut lines = stderr.lines().map_while(Result::ok);
    let url = lines
        .find_map(|line| line.strip_prefix("fencelock: metrics on ").map(str::to_owned))
        .expect("the metrics address is printed");
    assert!(
        common::eventually(Duration::from_secs(10), || key_exists(&nodes[0], "scraped")),
        "the run never took the lock"
    );
    let body = ureq::get(&url)
        .call()
        .expect("scrape")
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(body.contains("fencelock_acquired_total 1"), "{body}");
    assert!(body.contains("fencelock_held 1"), "{body}");
    assert!(
        body.contains("fencelock_acquire_latency_seconds_count 1"),
        "{body}"
    );
    let missing = ureq::get(url.replace("/metrics", "/other")).call();
    assert!(
        matches!(missing, Err(ureq::Error::StatusCode(404))),
        "{missing:?}"
    );
    assert!(run.wait().unwrap().success());
    let taken = output(
        &nodes,
        &["run", "--metrics-addr", "not an address", "x", "--", "true"],
    );
    assert_eq!(code(&taken), 2, "{}", text(&taken.stderr));
    assert!(
        text(&taken.stderr).contains("--metrics-addr"),
        "{}",
        text(&taken.stderr)
    );
}

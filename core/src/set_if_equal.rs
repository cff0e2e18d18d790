//! Re-takes by plain commands where a node has `SET … IFEQ` (Valkey 8.1 and
//! later, Redis 8.4 and later): docs/protocol.md §3.18.
//!
//! A looping holder's re-take is two script calls on each node: the
//! lingering RELEASE (`EVALSHA`, `GET`, `SET`) and the adopting ACQUIRE
//! (`EVALSHA`, `GET`, `SET`, `INCR`). Both only compare the key with one
//! value and set it to another, which `SET key new IFEQ old GET` does in one
//! command, so a node that has it runs them as one and two commands instead
//! of seven, in the same round trips. Each shortcut answers in its script's
//! reply shape, so nothing above [`crate::node`] tells them apart, and when
//! it cannot decide (the adopting ACQUIRE finds no reservation of its own)
//! the script runs after it and decides. A semaphore permit's lingering
//! release is the same RELEASE and gets the same shortcut; its re-take is
//! SEM_ACQUIRE, which picks among permits, and stays a script.
//!
//! Whether a node has `IFEQ` is asked once, before its first shortcut, with
//! a probe that a server ignoring the option would fail visibly (it would
//! create the probe key) rather than by a shortcut, which such a server
//! would run as a plain `SET` over another owner's lock.
//!
//! Only on standalone Redis nodes: a Redis Cluster would send the adopting
//! ACQUIRE's two commands concurrently, and PostgreSQL runs the scripts as
//! SQL functions.

use std::sync::atomic::{AtomicU8, Ordering};

use redis::{Cmd, Pipeline, Value};

use crate::connection::{Connection, pipeline};
use crate::scripts::{self, LuaScript};
use crate::store::StoreError;

/// Whether a node has `SET … IFEQ`: not known until its first shortcut
/// probes it, then kept for the client's life (a node upgraded meanwhile
/// keeps getting the scripts, which are always correct).
pub(crate) struct IfEqSupport(AtomicU8);

const UNKNOWN: u8 = 0;
const SUPPORTED: u8 = 1;
const UNSUPPORTED: u8 = 2;

impl IfEqSupport {
    /// For a standalone Redis node: probed before its first shortcut.
    pub(crate) fn unknown() -> Self {
        IfEqSupport(AtomicU8::new(UNKNOWN))
    }

    /// For nodes the shortcuts never go to (clusters, PostgreSQL).
    pub(crate) fn never() -> Self {
        IfEqSupport(AtomicU8::new(UNSUPPORTED))
    }

    /// Whether the shortcuts may go to this node, probing it on `conn` the
    /// first time (`probe_key`: a key of the lock's, which a node with
    /// `IFEQ` never creates).
    async fn allows(&self, conn: &mut Connection, probe_key: &str) -> Result<bool, StoreError> {
        match self.0.load(Ordering::Relaxed) {
            SUPPORTED => return Ok(true),
            UNSUPPORTED => return Ok(false),
            _ => {}
        }
        let supported = match probe(conn, probe_key).await {
            Ok(supported) => supported,
            Err(err) if is_syntax_error(&err) => false,
            Err(err) => return Err(err),
        };
        let state = if supported { SUPPORTED } else { UNSUPPORTED };
        self.0.store(state, Ordering::Relaxed);
        Ok(supported)
    }
}

/// `SET probe 1 IFEQ 0 PX 1000 GET` on an absent key, then `EXISTS probe`:
/// a node with `IFEQ` sets nothing (the key is not `0`); one that ignored
/// the option created the key (which runs out within a second); one without
/// it answers a syntax error.
async fn probe(conn: &mut Connection, probe_key: &str) -> Result<bool, StoreError> {
    let mut commands = pipeline();
    commands
        .cmd("SET")
        .arg(probe_key)
        .arg("1")
        .arg("IFEQ")
        .arg("0")
        .arg("PX")
        .arg(1000)
        .arg("GET")
        .cmd("EXISTS")
        .arg(probe_key);
    let [old, exists] = two_replies(conn.query_all(&commands).await?)?;
    old?;
    Ok(exists? == Value::Int(0))
}

/// A script call a node with `IFEQ` runs as plain commands instead.
pub(crate) struct Shortcut {
    /// The probe's key ([`IfEqSupport::allows`]).
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

    /// Runs the shortcut where the node has `IFEQ`: the reply its script
    /// would give, or `None` when the script must run (no `IFEQ` there, or a
    /// re-take that found no reservation of its own).
    pub(crate) async fn run(
        &self,
        conn: &mut Connection,
        support: &IfEqSupport,
    ) -> Option<Result<Value, StoreError>> {
        let decided = match support.allows(conn, &self.probe_key).await {
            Ok(true) => match &self.commands {
                Commands::Linger { set, token } => {
                    conn.query(set).await.map(|old| Some(released(&old, token)))
                }
                Commands::Retake {
                    incr_then_set,
                    reserved,
                } => retaken(conn, incr_then_set, reserved).await,
            },
            Ok(false) => Ok(None),
            Err(err) => Err(err),
        };
        decided.transpose()
    }
}

/// The adopting ACQUIRE's reply: the counter if the `SET` found the
/// reservation, `None` if it did not (nothing was set; the counter only
/// skipped a value).
async fn retaken(
    conn: &mut Connection,
    incr_then_set: &Pipeline,
    reserved: &[u8],
) -> Result<Option<Value>, StoreError> {
    let [counter, old] = two_replies(conn.query_all(incr_then_set).await?)?;
    if value_is(&old?, reserved) {
        counter.map(Some)
    } else {
        Ok(None)
    }
}

fn two_replies<T>(replies: Vec<T>) -> Result<[T; 2], StoreError> {
    <[T; 2]>::try_from(replies).map_err(|replies| {
        StoreError::Redis(redis::RedisError::from((
            redis::ErrorKind::Parse,
            "a pipeline of two commands got another number of replies",
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

/// What a server without `IFEQ` answers to `SET … IFEQ`.
fn is_syntax_error(err: &StoreError) -> bool {
    matches!(err, StoreError::Redis(err)
        if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError)
            && err.detail().is_some_and(|detail| detail.starts_with("syntax error")))
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
    fn only_a_syntax_error_says_the_node_lacks_ifeq() {
        assert!(is_syntax_error(&error_reply(b"-ERR syntax error\r\n")));
        for other in [
            &b"-NOPERM User locker has no permissions to run the 'set' command\r\n"[..],
            b"-ERR wrong number of arguments for 'set' command\r\n",
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ] {
            assert!(
                !is_syntax_error(&error_reply(other)),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }
}

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
//! the script runs after it and decides. A node without `IFEQ` answers a
//! syntax error: it is marked and gets the scripts from then on.
//!
//! Only on standalone Redis nodes: a Redis Cluster would send the adopting
//! ACQUIRE's two commands concurrently, and PostgreSQL runs the scripts as
//! SQL functions.

use std::sync::atomic::{AtomicBool, Ordering};

use redis::{Cmd, Pipeline, Value};

use crate::connection::{Connection, pipeline};
use crate::error::ErrorKind;
use crate::scripts::{self, LuaScript};
use crate::store::StoreError;

/// Whether a node may have `SET … IFEQ`: yes until it answers one with a
/// syntax error. Kept for the client's life: a node upgraded meanwhile
/// keeps getting the scripts, which are always correct.
pub(crate) struct IfEqSupport(AtomicBool);

impl IfEqSupport {
    /// For a standalone Redis node: tried until refused.
    pub(crate) fn untried() -> Self {
        IfEqSupport(AtomicBool::new(true))
    }

    /// For nodes the shortcuts never go to (clusters, PostgreSQL).
    pub(crate) fn never() -> Self {
        IfEqSupport(AtomicBool::new(false))
    }

    fn may_try(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn refused(&self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// A script call a node with `IFEQ` runs as plain commands instead.
pub(crate) enum Shortcut {
    /// The lingering RELEASE (keep_for given): `SET lock w:<keep_for> IFEQ
    /// token PX window GET`. The old value says what RELEASE would return.
    Linger { set: Cmd, token: Vec<u8> },
    /// The adopting ACQUIRE's first attempt: `SET lock token IFEQ
    /// w:<waiter> PX ttl GET` and `INCR fence`, pipelined. Granted when the
    /// old value was the reservation; the counter is then the reply.
    Retake { commands: Pipeline, reserved: Vec<u8> },
}

impl Shortcut {
    /// The shortcut of a RELEASE with a non-empty `keep_for`
    /// (`KEYS = {lock, queue, leases}`, `ARGV = {token, window_ms, counted,
    /// keep_for}`); `None` for any other call.
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
        Some(Shortcut::Linger {
            set,
            token: token.as_ref().to_vec(),
        })
    }

    /// The shortcut of an ACQUIRE that takes back the key its client
    /// reserved for `waiter` (`KEYS = {lock, fence, queue, leases}`,
    /// `ARGV = {token, ttl_ms, waiter, ticket, lease_ms, fair}`); `None`
    /// unless it is the first attempt of a waiter that never queued
    /// (ticket 0), in the default mode: only then is a grant of the
    /// reservation the script's `SET` and `INCR` alone.
    pub(crate) fn retake<A: AsRef<[u8]>>(keys: &[&str], args: &[A]) -> Option<Self> {
        let ([lock, fence, ..], [token, ttl_ms, waiter, ticket, _lease_ms, fair]) = (keys, args) else {
            return None;
        };
        let waiter = waiter.as_ref();
        if waiter.is_empty() || ticket.as_ref() != b"0" || fair.as_ref() != b"0" {
            return None;
        }
        let reserved = [b"w:", waiter].concat();
        let mut commands = pipeline();
        commands
            .cmd("SET")
            .arg(lock)
            .arg(token.as_ref())
            .arg("IFEQ")
            .arg(&reserved)
            .arg("PX")
            .arg(ttl_ms.as_ref())
            .arg("GET")
            .cmd("INCR")
            .arg(fence);
        Some(Shortcut::Retake { commands, reserved })
    }

    /// Runs the shortcut on a node that may have `IFEQ`: the reply its script
    /// would give, or `None` when the script must run (no `IFEQ` there, or a
    /// re-take that found no reservation of its own).
    pub(crate) async fn run(
        &self,
        conn: &mut Connection,
        support: &IfEqSupport,
    ) -> Option<Result<Value, StoreError>> {
        if !support.may_try() {
            return None;
        }
        let decided = match self {
            Shortcut::Linger { set, token } => conn.query(set).await.map(|old| Some(released(&old, token))),
            Shortcut::Retake { commands, reserved } => retaken(conn, commands, reserved).await,
        };
        match decided {
            Ok(reply) => reply.map(Ok),
            Err(err) if is_syntax_error(&err) => {
                support.refused();
                None
            }
            Err(err) => Some(Err(err)),
        }
    }
}

/// The adopting ACQUIRE's reply: the counter if the `SET` found the
/// reservation (an `INCR` that failed fails the call, as in the script,
/// whose `SET` also stays), `None` if it did not.
async fn retaken(
    conn: &mut Connection,
    commands: &Pipeline,
    reserved: &[u8],
) -> Result<Option<Value>, StoreError> {
    let mut replies = conn.query_all(commands).await?.into_iter();
    let (Some(old), Some(counter)) = (replies.next(), replies.next()) else {
        return Err(StoreError::refused(
            ErrorKind::Unavailable,
            "a pipeline of SET and INCR did not get two replies",
        ));
    };
    if is(&old?, reserved) {
        counter.map(Some)
    } else {
        Ok(None)
    }
}

/// RELEASE's reply from the old value of its key: 1 (it held the token),
/// -1 (absent) or 0 (another owner's, or a reservation).
fn released(old: &Value, token: &[u8]) -> Value {
    Value::Int(match old {
        Value::Nil => -1,
        old if is(old, token) => 1,
        _ => 0,
    })
}

fn is(value: &Value, expected: &[u8]) -> bool {
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
        let Some(Shortcut::Linger { set, token }) = lingering else {
            panic!("a lingering release")
        };
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
        let Some(Shortcut::Retake { commands, reserved }) = retake("c1-w2", "0", "0") else {
            panic!("a re-take")
        };
        assert_eq!(reserved, b"w:c1-w2");
        let sent: Vec<Vec<String>> = commands.cmd_iter().map(words).collect();
        assert_eq!(
            sent,
            [
                vec!["SET", "p{r}", "tok", "IFEQ", "w:c1-w2", "PX", "5000", "GET"],
                vec!["INCR", "p{r}:fence"]
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
}

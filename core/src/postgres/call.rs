//! A session's script calls: a protocol script, written as Redis's
//! `EVALSHA` command, run as its SQL function, and the reply read back as
//! the Lua reply it mirrors.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redis::{Cmd, Value};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Row, Statement};

use super::scan::ScanCall;
use crate::error::ErrorKind;
use crate::scripts::{self, LuaScript};
use crate::store::StoreError;

/// The parameter types of a script call: name, KEYS, ARGV.
pub(super) const CALL_TYPES: [Type; 3] = [Type::TEXT, Type::TEXT_ARRAY, Type::TEXT_ARRAY];

/// The prepared form of a script call, guarded by a marker of this node's
/// client: `$4` must equal the literal, or the statement returns no row
/// without running the script. A pooler may bind our statement's name to
/// a server session where another client prepared that name (another
/// schema's call, say); that statement then answers with no row, and the
/// call is sent again unnamed, instead of running someone else's SQL.
pub(super) fn prepared_call(call: &str, marker: &str) -> String {
    format!("{call} WHERE $4::text = '{marker}'")
}

/// The parameter types of the prepared form.
pub(super) const PREPARED_TYPES: [Type; 4] = [Type::TEXT, Type::TEXT_ARRAY, Type::TEXT_ARRAY, Type::TEXT];

/// One session with the server, and the script call's SQL.
#[derive(Clone)]
pub(crate) struct PgConnection {
    pub(super) client: Arc<Client>,
    /// The statement that runs a script.
    pub(super) call: Arc<str>,
    /// `call` prepared on this session (parsed and planned once), unless a
    /// transaction pooler may stand between (docs/postgres-store.md).
    pub(super) prepared: Option<Statement>,
    /// The node's pooler switch, shared by its sessions.
    pub(super) pooler: Arc<PoolerSwitch>,
    /// The marker `prepared` checks (see [`prepared_call`]).
    pub(super) marker: Arc<str>,
    /// The statement that lists keys (a SCAN page).
    pub(super) list: Arc<str>,
}

/// Whether a transaction-pooling proxy stands between the client and a
/// node, which keeps no session state from one statement to the next: said
/// by the URL (`fencelock_pooler=transaction`), or found out when a prepared
/// statement vanished between two calls.
pub(super) struct PoolerSwitch {
    pooled: AtomicBool,
    /// The node, for the warning.
    node: String,
}

impl PoolerSwitch {
    pub(super) fn new(pooled: bool, node: String) -> Self {
        PoolerSwitch {
            pooled: AtomicBool::new(pooled),
            node,
        }
    }

    pub(super) fn pooled(&self) -> bool {
        self.pooled.load(Ordering::Relaxed)
    }

    /// From now on, every session of the node sends unnamed statements.
    pub(super) fn found(&self, err: &str) {
        if !self.pooled.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                node = %self.node,
                error = %err,
                "a prepared statement vanished between calls: a transaction pooler stands in \
                 front; every call now sends its statement; add fencelock_pooler=transaction \
                 to the URL to say so"
            );
        }
    }
}

/// An error that says the statement never ran because the session that
/// prepared it is not the one the call reached (a pooler handed the call to
/// another server session): safe to send again, unnamed.
pub(super) fn is_vanished_statement(err: &tokio_postgres::Error) -> bool {
    err.code().is_some_and(|code| {
        [
            SqlState::INVALID_SQL_STATEMENT_NAME,
            SqlState::DUPLICATE_PSTATEMENT,
            SqlState::PROTOCOL_VIOLATION,
        ]
        .contains(code)
    })
}

impl PgConnection {
    /// The rows of one script call: through the session's prepared
    /// statement, or as an unnamed statement (typed, still one round trip)
    /// where a transaction pooler keeps no prepared statement.
    async fn call_script(
        &self,
        script: &LuaScript,
        keys: &[String],
        args: &[String],
    ) -> std::result::Result<Vec<Row>, StoreError> {
        if let Some(statement) = self.prepared.as_ref().filter(|_| !self.pooler.pooled()) {
            let marker: &str = &self.marker;
            match self
                .client
                .query(statement, &[&script.name, &keys, &args, &marker])
                .await
            {
                Err(err) if is_vanished_statement(&err) => self.pooler.found(&err.to_string()),
                // Another client's statement under our statement's name.
                Ok(rows) if rows.is_empty() => self.pooler.found("another client's statement answered"),
                rows => return Ok(rows?),
            }
        }
        let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 3] = [
            (&script.name, CALL_TYPES[0].clone()),
            (&keys, CALL_TYPES[1].clone()),
            (&args, CALL_TYPES[2].clone()),
        ];
        Ok(self.client.query_typed(&self.call, &params).await?)
    }

    /// Every script call of `pipe`, sent at once: tokio-postgres pipelines
    /// the requests made together on one session.
    pub(crate) async fn run_all(
        &self,
        pipe: &redis::Pipeline,
    ) -> Vec<std::result::Result<Value, StoreError>> {
        futures_util::future::join_all(pipe.cmd_iter().map(|cmd| self.run(cmd))).await
    }

    /// Runs a script call written as Redis's `EVALSHA`/`EVAL` command
    /// (`NAME sha-or-source numkeys keys… args…`) as the SQL function of
    /// the same script.
    pub(crate) async fn run(&self, cmd: &Cmd) -> std::result::Result<Value, StoreError> {
        if let Some(scan) = ScanCall::parse(cmd) {
            return self.scan(scan?).await;
        }
        let (script, keys, args) = script_call(cmd)?;
        let rows = self.call_script(script, &keys, &args).await?;
        let Some(row) = rows.first() else {
            return Err(StoreError::refused(
                ErrorKind::Unavailable,
                "the script call returned no row",
            ));
        };
        let reply: Option<serde_json::Value> = row.get(0);
        reply_from_json(reply.unwrap_or(serde_json::Value::Null))
    }
}

/// The script, keys and arguments of an `EVALSHA`/`EVAL` command.
fn script_call(cmd: &Cmd) -> std::result::Result<(&'static LuaScript, Vec<String>, Vec<String>), StoreError> {
    let mut words = cmd.args_iter().map(|arg| match arg {
        redis::Arg::Simple(bytes) => bytes,
        _ => &b""[..],
    });
    let malformed = || StoreError::refused(ErrorKind::Unavailable, "not a script call");
    let _command = words.next().ok_or_else(malformed)?;
    let script = words.next().ok_or_else(malformed)?;
    let script = scripts::all()
        .into_iter()
        .find(|known| known.sha().as_bytes() == script || known.source.as_bytes() == script)
        .ok_or_else(malformed)?;
    let count: usize = std::str::from_utf8(words.next().ok_or_else(malformed)?)
        .ok()
        .and_then(|n| n.parse().ok())
        .ok_or_else(malformed)?;
    let mut texts = words.map(text);
    let keys = texts
        .by_ref()
        .take(count)
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let args = texts.collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((script, keys, args))
}

/// PostgreSQL's `text` holds UTF-8 without NUL: other bytes are refused, not altered.
fn text(bytes: &[u8]) -> std::result::Result<String, StoreError> {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => Ok(text.to_owned()),
        _ => Err(StoreError::refused(
            ErrorKind::InvalidArgument,
            "a PostgreSQL node stores text: values must be UTF-8 without NUL bytes",
        )),
    }
}

/// A script's reply, as the Lua script's on Redis: integers, strings, nil, arrays.
fn reply_from_json(json: serde_json::Value) -> std::result::Result<Value, StoreError> {
    Ok(match json {
        serde_json::Value::Null | serde_json::Value::Bool(false) => Value::Nil,
        serde_json::Value::Bool(true) => Value::Int(1),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(n) => Value::Int(n),
            None => Value::BulkString(n.to_string().into_bytes()),
        },
        serde_json::Value::String(s) => Value::BulkString(s.into_bytes()),
        serde_json::Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(reply_from_json)
                .collect::<std::result::Result<_, _>>()?,
        ),
        serde_json::Value::Object(_) => {
            return Err(StoreError::refused(
                ErrorKind::Unavailable,
                "a script replied with an object",
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_read_as_the_lua_replies() {
        let json = serde_json::json!([0, -1, "7", null, [1, "x"]]);
        assert_eq!(
            reply_from_json(json).unwrap(),
            Value::Array(vec![
                Value::Int(0),
                Value::Int(-1),
                Value::BulkString(b"7".to_vec()),
                Value::Nil,
                Value::Array(vec![Value::Int(1), Value::BulkString(b"x".to_vec())]),
            ])
        );
    }

    #[test]
    fn a_script_call_is_read_back_from_its_command() {
        let cmd = crate::node::evalsha_cmd(&scripts::RELEASE, &["p{r}", "p{r}:queue"], &["tok", "5"]);
        let (script, keys, args) = script_call(&cmd).unwrap();
        assert_eq!(script.name, "release");
        assert_eq!(keys, ["p{r}", "p{r}:queue"]);
        assert_eq!(args, ["tok", "5"]);
        let bad = crate::node::evalsha_cmd(&scripts::RELEASE, &["p{r}"], &[&b"\xff"[..]]);
        let Err(refused) = script_call(&bad) else {
            panic!("bytes that are not UTF-8 were sent")
        };
        assert_eq!(refused.classify().kind, ErrorKind::InvalidArgument);
    }
}

//! A PostgreSQL server as a node (docs/postgres-store.md): the protocol's
//! scripts run as SQL functions (`core/sql/fencelock.sql`, installed on
//! first use), called through tokio-postgres, and their replies read as the
//! Lua replies they mirror. Wake-ups and leaders are `LISTEN`/`NOTIFY`, with
//! a session advisory lock that tells publishers someone listens.
//!
//! Nothing here holds session state a lock depends on: each script is one
//! statement (its own transaction), so a transaction-pooling proxy such as
//! PgBouncer can stand between; only the subscriptions, which are hints,
//! need a session of their own.

use std::sync::Arc;

use futures_util::StreamExt;
use redis::{Cmd, Value};
use tokio_postgres::error::SqlState;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::types::Type;
use tokio_postgres::{AsyncMessage, Client, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::connection::{Connection, EndNotice, watched};
use crate::endpoint::Endpoint;
use crate::error::{Error, ErrorKind, NodeFailure, Result};
use crate::node::NodeSettings;
use crate::persistence::Persistence;
use crate::scripts::{self, LuaScript};
use crate::store::{Messages, StoreError};
use crate::tls::TlsMaterial;

/// The DDL, with `__SCHEMA__` for the schema's quoted name.
const SCHEMA_SQL: &str = include_str!("../sql/fencelock.sql");

/// The protocol version the SQL functions must speak (`schema_version()`).
const PROTOCOL_VERSION: i32 = 3;

/// How a PostgreSQL node's connections are made.
#[derive(Clone)]
pub(crate) struct PgFactory {
    /// The script calls' sessions.
    config: tokio_postgres::Config,
    /// The LISTEN sessions': the same server, but never through a pooler.
    listen_config: tokio_postgres::Config,
    tls: Option<MakeRustlsConnect>,
    /// The schema as a quoted identifier, ready to go into SQL.
    schema: String,
}

/// One session with the server, and the script call's SQL.
#[derive(Clone)]
pub(crate) struct PgConnection {
    client: Arc<Client>,
    /// The statement that runs a script.
    call: Arc<str>,
    /// The statement that lists keys (a SCAN page).
    list: Arc<str>,
}

/// The URL's configuration with the client's credentials and our session settings.
fn session_config(mut config: tokio_postgres::Config, settings: &NodeSettings) -> tokio_postgres::Config {
    if let Some(user) = &settings.username {
        config.user(user);
    }
    if let Some(password) = &settings.password {
        config.password(password);
    }
    config
        .application_name("fencelock")
        .connect_timeout(settings.connect_timeout)
        .keepalives(true)
        .keepalives_idle(std::time::Duration::from_secs(5));
    config
}

/// The client's TLS settings, with the CA bundle of the URL's
/// `sslrootcert` (which names this node's CA) in place of the client's.
fn tls_material(endpoint: &Endpoint, settings: &NodeSettings) -> Result<TlsMaterial> {
    let mut material = settings.tls.clone();
    if let Some(path) = endpoint.postgres.as_ref().and_then(|p| p.root_cert_file.as_ref()) {
        let pem = std::fs::read(path).map_err(|e| {
            Error::config(format!(
                "sslrootcert of node {endpoint}: cannot read {}: {e}",
                path.display()
            ))
        })?;
        material.root_ca_pem = Some(pem);
    }
    Ok(material)
}

impl PgFactory {
    pub(crate) fn new(endpoint: &Endpoint, settings: &NodeSettings) -> Result<Self> {
        let options = endpoint
            .postgres
            .as_ref()
            .ok_or_else(|| Error::config("a PostgreSQL node without its options"))?;
        let tls = endpoint
            .tls
            .then(|| crate::tls::client_config(&tls_material(endpoint, settings)?, &endpoint.to_string()))
            .transpose()?
            .map(MakeRustlsConnect::new);
        Ok(PgFactory {
            config: session_config(endpoint.postgres_config()?, settings),
            listen_config: session_config(endpoint.postgres_listen_config()?, settings),
            tls,
            schema: quote_identifier(&options.schema),
        })
    }

    /// A new session with the schema installed (on first use), and what
    /// the server says of its durability.
    pub(crate) async fn connect(
        &self,
        ended: EndNotice,
    ) -> std::result::Result<(Connection, Persistence), StoreError> {
        let client = match &self.tls {
            Some(tls) => self.session(tls.clone(), ended).await?,
            None => self.session(tokio_postgres::NoTls, ended).await?,
        };
        self.install(&client, false).await?;
        let call = format!("SELECT {}.script($1, $2, $3)", self.schema).into();
        let list = format!(
            "SELECT key FROM {}.keys WHERE key ~ $1 \
             AND (expires_at IS NULL OR expires_at > clock_timestamp()) \
             ORDER BY key OFFSET $2 LIMIT $3",
            self.schema
        )
        .into();
        let persistence = durability(&client).await;
        Ok((
            Connection::Postgres(PgConnection {
                client: Arc::new(client),
                call,
                list,
            }),
            persistence,
        ))
    }

    async fn session<T>(&self, tls: T, ended: EndNotice) -> std::result::Result<Client, StoreError>
    where
        T: MakeTlsConnect<Socket> + Send,
        T::Stream: Send + 'static,
        T::TlsConnect: Send,
        <T::TlsConnect as tokio_postgres::tls::TlsConnect<Socket>>::Future: Send,
    {
        let (client, connection) = self.config.connect(tls).await?;
        // On this runtime: a caller's connection dies with it.
        tokio::spawn(watched(
            Box::pin(async move {
                let _ = connection.await;
            }),
            ended,
        ));
        Ok(client)
    }

    /// Runs the DDL on a session of its own (creating or replacing every
    /// table and function: an upgrade too), and checks the version.
    pub(crate) async fn migrate(&self) -> std::result::Result<(), StoreError> {
        let client = match &self.tls {
            Some(tls) => self.session(tls.clone(), EndNotice::default()).await?,
            None => self.session(tokio_postgres::NoTls, EndNotice::default()).await?,
        };
        self.install(&client, true).await
    }

    /// Creates the schema, tables and functions when they are missing (or
    /// `always`), and checks that they speak this protocol version.
    async fn install(&self, client: &Client, always: bool) -> std::result::Result<(), StoreError> {
        let probe = format!("{}.script(text,text[],text[])", self.schema);
        let row = client
            .query_one("SELECT to_regprocedure($1) IS NOT NULL", &[&probe])
            .await?;
        if always || !row.get::<_, bool>(0) {
            client
                .batch_execute(&SCHEMA_SQL.replace("__SCHEMA__", &self.schema))
                .await?;
        }
        let version: i32 = client
            .query_one(&format!("SELECT {}.schema_version()", self.schema), &[])
            .await?
            .get(0);
        if version != PROTOCOL_VERSION {
            return Err(StoreError::refused(
                ErrorKind::Config,
                format!(
                    "schema {} speaks protocol version {version}, this client {PROTOCOL_VERSION}: \
                     run `fencelock migrate` with this version, or use another schema",
                    self.schema
                ),
            ));
        }
        Ok(())
    }

    /// A session of its own listening on `channel`, holding the advisory
    /// lock that makes publishers count it (docs/postgres-store.md).
    pub(crate) async fn subscribe(&self, channel: &str) -> std::result::Result<Messages, StoreError> {
        match &self.tls {
            Some(tls) => self.listen(tls.clone(), channel).await,
            None => self.listen(tokio_postgres::NoTls, channel).await,
        }
    }

    async fn listen<T>(&self, tls: T, channel: &str) -> std::result::Result<Messages, StoreError>
    where
        T: MakeTlsConnect<Socket> + Send,
        T::Stream: Send + 'static,
        T::TlsConnect: Send,
        <T::TlsConnect as tokio_postgres::tls::TlsConnect<Socket>>::Future: Send,
    {
        let (client, mut connection) = self.listen_config.connect(tls).await?;
        let messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        // The connection is driven by the stream below; queries need it driven too.
        let driver = tokio::spawn(async move {
            let mut messages = std::pin::pin!(messages);
            while let Some(Ok(message)) = messages.next().await {
                if let AsyncMessage::Notification(notification) = message
                    && sender.send(notification.payload().as_bytes().to_vec()).is_err()
                {
                    break;
                }
            }
        });
        let schema = &self.schema;
        let row = client
            .query_one(&format!("SELECT {schema}.notify_channel($1)"), &[&channel])
            .await?;
        let name: String = row.get(0);
        client
            .batch_execute(&format!("LISTEN {}", quote_identifier(&name)))
            .await?;
        client
            .execute(
                &format!("SELECT pg_advisory_lock_shared({schema}.listener_key($1))"),
                &[&channel],
            )
            .await?;
        let session = Session {
            _client: client,
            driver,
        };
        Ok(Box::pin(tokio_stream_from(receiver).map(move |payload| {
            let _keep = &session;
            payload
        })))
    }
}

/// A listening session: its client, and the task that drives its connection.
struct Session {
    _client: Client,
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

fn tokio_stream_from(
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
) -> impl futures_util::Stream<Item = Vec<u8>> {
    futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

impl PgConnection {
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
        // Typed parameters: one round trip and no named prepared statement,
        // which a transaction-pooling proxy (PgBouncer) could not keep.
        let rows = self
            .client
            .query_typed(
                &self.call,
                &[
                    (&script.name, Type::TEXT),
                    (&keys, Type::TEXT_ARRAY),
                    (&args, Type::TEXT_ARRAY),
                ],
            )
            .await?;
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

/// A `SCAN cursor MATCH pattern COUNT n` command: the one command besides
/// the scripts that a PostgreSQL node answers (for listing locks).
struct ScanCall {
    /// Keys already returned, in key order.
    offset: i64,
    /// The pattern as a PostgreSQL regular expression.
    regex: String,
    count: i64,
}

impl ScanCall {
    /// `None` when `cmd` is not a SCAN.
    fn parse(cmd: &Cmd) -> Option<std::result::Result<ScanCall, StoreError>> {
        let mut words = cmd.args_iter().map(|arg| match arg {
            redis::Arg::Simple(bytes) => bytes,
            _ => &b""[..],
        });
        if !words.next()?.eq_ignore_ascii_case(b"SCAN") {
            return None;
        }
        let number = |word: Option<&[u8]>| -> Option<i64> { std::str::from_utf8(word?).ok()?.parse().ok() };
        let words: Vec<&[u8]> = words.collect();
        let parsed = match words[..] {
            [cursor, b"MATCH", pattern, b"COUNT", count] => (|| {
                Some(ScanCall {
                    offset: number(Some(cursor))?,
                    regex: glob_to_regex(std::str::from_utf8(pattern).ok()?),
                    count: number(Some(count))?.max(1),
                })
            })(),
            _ => None,
        };
        Some(
            parsed
                .ok_or_else(|| StoreError::refused(ErrorKind::Unavailable, "not a SCAN this store answers")),
        )
    }
}

impl PgConnection {
    /// A SCAN page, as Redis replies: `[next cursor, [keys…]]`, the cursor
    /// 0 after the last page. Keys whose expiry passed are not listed.
    async fn scan(&self, scan: ScanCall) -> std::result::Result<Value, StoreError> {
        let rows = self
            .client
            .query_typed(
                &self.list,
                &[
                    (&scan.regex, Type::TEXT),
                    (&scan.offset, Type::INT8),
                    (&scan.count, Type::INT8),
                ],
            )
            .await?;
        let next = if (rows.len() as i64) < scan.count {
            0
        } else {
            scan.offset + scan.count
        };
        let keys = rows
            .iter()
            .map(|row| Value::BulkString(row.get::<_, String>(0).into_bytes()))
            .collect();
        Ok(Value::Array(vec![
            Value::BulkString(next.to_string().into_bytes()),
            Value::Array(keys),
        ]))
    }
}

/// A Redis glob (`*`, `?`, `[…]`, `\x`) as an anchored PostgreSQL regular
/// expression that matches the same keys.
fn glob_to_regex(glob: &str) -> String {
    let mut regex = String::from("^");
    let mut chars = glob.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' => regex.push_str(".*"),
            '?' => regex.push('.'),
            '\\' => push_literal(&mut regex, chars.next().unwrap_or('\\')),
            '[' => {
                regex.push('[');
                let mut first = true;
                for c in chars.by_ref() {
                    match c {
                        ']' if !first => break,
                        '^' if first => regex.push('^'),
                        '\\' => regex.push_str("\\\\"),
                        '[' => regex.push_str("\\["),
                        _ => regex.push(c),
                    }
                    first = false;
                }
                regex.push(']');
            }
            _ => push_literal(&mut regex, c),
        }
    }
    regex.push('$');
    regex
}

fn push_literal(regex: &mut String, c: char) {
    if !c.is_alphanumeric() {
        regex.push('\\');
    }
    regex.push(c);
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

/// Whether committed writes survive a crash of the server.
async fn durability(client: &Client) -> Persistence {
    let row = client
        .query_one(
            "SELECT current_setting('fsync'), current_setting('synchronous_commit')",
            &[],
        )
        .await;
    match row {
        Ok(row) => {
            let (fsync, commit): (String, String) = (row.get(0), row.get(1));
            if fsync == "on" && commit != "off" {
                Persistence::Durable
            } else {
                Persistence::NotDurable(format!("fsync is {fsync}, synchronous_commit {commit}"))
            }
        }
        Err(err) => Persistence::Unknown(format!("reading fsync failed: {err}")),
    }
}

/// `"name"`, with inner quotes doubled: an identifier whatever it holds.
fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Classifies a tokio-postgres error so quorum errors report the right kind.
pub(crate) fn classify_postgres_error(err: &tokio_postgres::Error) -> NodeFailure {
    if let Some(db) = err.as_db_error() {
        let code = db.code();
        let (kind, advice) = if *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            (
                ErrorKind::Auth,
                "; check the user and password of the postgresql:// URL",
            )
        } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
            (
                ErrorKind::Auth,
                "; grant the role the privileges listed in docs/postgres-store.md",
            )
        } else if *code == SqlState::QUERY_CANCELED || *code == SqlState::LOCK_NOT_AVAILABLE {
            (
                ErrorKind::Unavailable,
                "; the server cancelled the script: raise statement_timeout and lock_timeout \
                 of the role fencelock connects as above the client's per-node timeout",
            )
        } else {
            (ErrorKind::Unavailable, "")
        };
        return NodeFailure {
            kind,
            detail: format!("{} (SQLSTATE {}){advice}", db.message(), code.code()),
        };
    }
    // tokio-postgres keeps its error kinds private; its TLS failures all
    // read "error performing TLS handshake: …".
    let tls = err.to_string().contains("TLS handshake")
        || std::iter::successors(std::error::Error::source(err), |e| e.source())
            .any(|e| e.is::<rustls::Error>() || e.to_string().contains("certificate"));
    if tls {
        return NodeFailure {
            kind: ErrorKind::Tls,
            detail: format!(
                "{}; the server must offer TLS with a certificate for this host name \
                 signed by the CA given (sslrootcert in the URL, or the client's CA bundle), \
                 or use sslmode=disable on a trusted network",
                with_causes(err)
            ),
        };
    }
    NodeFailure {
        kind: ErrorKind::Unavailable,
        detail: with_causes(err),
    }
}

/// The error and its causes, which tokio-postgres's `Display` leaves out:
/// "error performing TLS handshake: invalid peer certificate: UnknownIssuer".
fn with_causes(err: &tokio_postgres::Error) -> String {
    let mut text = err.to_string();
    for cause in std::iter::successors(std::error::Error::source(err), |e| e.source()) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_become_anchored_regular_expressions() {
        assert_eq!(
            glob_to_regex("fencelock:{*}:fence"),
            r"^fencelock\:\{.*\}\:fence$"
        );
        assert_eq!(glob_to_regex(r"a\*b?"), r"^a\*b.$");
        assert_eq!(glob_to_regex("[^a-c]x"), "^[^a-c]x$");
        assert_eq!(glob_to_regex("[]]"), "^[]]$");
        assert_eq!(glob_to_regex("é.+"), r"^é\.\+$");
    }

    #[test]
    fn identifiers_are_quoted_whatever_they_hold() {
        assert_eq!(quote_identifier("fencelock"), "\"fencelock\"");
        assert_eq!(quote_identifier("a\"b; DROP"), "\"a\"\"b; DROP\"");
    }

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

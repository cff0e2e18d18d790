//! A PostgreSQL server as a node (docs/postgres-store.md): the protocol's
//! scripts run as SQL functions (`core/sql/fencelock.sql`, installed on
//! first use), called through tokio-postgres, and their replies read as the
//! Lua replies they mirror. Wake-ups and leaders are `LISTEN`/`NOTIFY`, with
//! a session advisory lock that tells publishers someone listens.
//!
//! Nothing here holds session state a lock depends on: each script is one
//! statement (its own transaction), so a transaction-pooling proxy such as
//! PgBouncer can stand between. A session keeps only the script call
//! prepared (a speed-up, never prepared behind a declared pooler and sent
//! unnamed once a pooler is found out) and the subscriptions, which are
//! hints, have sessions of their own.
//!
//! - `mod.rs`: making sessions (TLS, credentials), installing the schema,
//!   and the LISTEN sessions of wake-ups.
//! - `call.rs`: a session's script calls, and their replies as Lua's.
//! - `scan.rs`: the one other command a node answers, SCAN, for listing locks.
//! - `error.rs`: PostgreSQL's errors as node failures, with what to do.

mod call;
mod error;
mod scan;

use std::sync::Arc;

use futures_util::StreamExt;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{AsyncMessage, Client, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

pub(crate) use call::PgConnection;
use call::{PREPARED_TYPES, PoolerSwitch, is_vanished_statement, prepared_call};
pub(crate) use error::classify_postgres_error;

use crate::connection::{
    Connection, EndNotice, KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES, TCP_USER_TIMEOUT, watched,
};
use crate::endpoint::Endpoint;
use crate::error::{Error, ErrorKind, Result};
use crate::node::NodeSettings;
use crate::persistence::Persistence;
use crate::scripts::PROTOCOL_VERSION;
use crate::store::{Messages, StoreError};
use crate::tls::TlsMaterial;

/// The DDL, with `__SCHEMA__` for the schema's quoted name.
const SCHEMA_SQL: &str = include_str!("../../sql/fencelock.sql");

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
    /// Whether a transaction pooler stands between: no prepared statements.
    pooler: Arc<PoolerSwitch>,
    /// Random, per client and node: the guard of its prepared statement.
    marker: Arc<str>,
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
        // As on every Redis connection (docs/protocol.md §4.1): the kernel
        // notices a dead peer within seconds, idle (a LISTEN session) or not.
        .keepalives(true)
        .keepalives_idle(KEEPALIVE_IDLE)
        .keepalives_interval(KEEPALIVE_INTERVAL)
        .keepalives_retries(KEEPALIVE_PROBES)
        .tcp_user_timeout(TCP_USER_TIMEOUT);
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
            pooler: Arc::new(PoolerSwitch::new(options.pooled, endpoint.to_string())),
            marker: format!("{:016x}", crate::token::random_u64()?).into(),
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
        let call: Arc<str> = format!("SELECT {}.script($1, $2, $3)", self.schema).into();
        let prepared = self.prepare(&client, &call).await?;
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
                prepared,
                pooler: self.pooler.clone(),
                marker: self.marker.clone(),
                list,
            }),
            persistence,
        ))
    }

    /// The script call prepared on this session, unless a pooler stands between.
    async fn prepare(
        &self,
        client: &Client,
        call: &str,
    ) -> std::result::Result<Option<tokio_postgres::Statement>, StoreError> {
        if self.pooler.pooled() {
            return Ok(None);
        }
        match client
            .prepare_typed(&prepared_call(call, &self.marker), &PREPARED_TYPES)
            .await
        {
            Ok(statement) => Ok(Some(statement)),
            Err(err) if is_vanished_statement(&err) => {
                self.pooler.found(&err.to_string());
                Ok(None)
            }
            Err(err) => Err(err.into()),
        }
    }

    async fn session<T>(&self, tls: T, ended: EndNotice) -> std::result::Result<Client, StoreError>
    where
        T: MakeTlsConnect<Socket> + Send + 'static,
        T::Stream: Send + 'static,
        T::TlsConnect: Send,
        <T::TlsConnect as tokio_postgres::tls::TlsConnect<Socket>>::Future: Send,
    {
        let (client, connection) = connect_off_the_workers(&self.config, tls).await?;
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
        T: MakeTlsConnect<Socket> + Send + 'static,
        T::Stream: Send + 'static,
        T::TlsConnect: Send,
        <T::TlsConnect as tokio_postgres::tls::TlsConnect<Socket>>::Future: Send,
    {
        let (client, mut connection) = connect_off_the_workers(&self.listen_config, tls).await?;
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

/// A session's client and the connection that drives it.
type Connected<T> = (
    Client,
    tokio_postgres::Connection<Socket, <T as MakeTlsConnect<Socket>>::Stream>,
);

/// Connects with `config` on a thread of the runtime's blocking pool, bounded
/// by the config's connect timeout. SCRAM stretches the password with
/// thousands of HMAC rounds; on a worker, that would hold up every other
/// task of the runtime (other clients' renewals and releases) meanwhile.
async fn connect_off_the_workers<T>(
    config: &tokio_postgres::Config,
    tls: T,
) -> std::result::Result<Connected<T>, StoreError>
where
    T: MakeTlsConnect<Socket> + Send + 'static,
    T::Stream: Send + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as tokio_postgres::tls::TlsConnect<Socket>>::Future: Send,
{
    let config = config.clone();
    // Always set by `session_config`.
    let limit = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(std::time::Duration::from_secs(10));
    let runtime = tokio::runtime::Handle::current();
    let handshake = tokio::task::spawn_blocking(move || {
        runtime.block_on(tokio::time::timeout(limit, config.connect(tls)))
    });
    match handshake.await {
        Ok(Ok(connected)) => Ok(connected?),
        Ok(Err(_elapsed)) => Err(StoreError::refused(
            ErrorKind::Unavailable,
            format!(
                "connecting took longer than the connect timeout ({limit:?}); \
                 check that the server is up and not overloaded, or raise the connect timeout"
            ),
        )),
        Err(stopped) => Err(StoreError::refused(
            ErrorKind::Unavailable,
            format!("connecting stopped: {stopped}; the runtime is shutting down"),
        )),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_whatever_they_hold() {
        assert_eq!(quote_identifier("fencelock"), "\"fencelock\"");
        assert_eq!(quote_identifier("a\"b; DROP"), "\"a\"\"b; DROP\"");
    }

    /// Records the thread that runs the handshake (which calls it once the
    /// socket is connected), then connects without TLS.
    struct RecordsTheThread(Arc<std::sync::Mutex<Option<std::thread::ThreadId>>>);

    impl MakeTlsConnect<Socket> for RecordsTheThread {
        type Stream = tokio_postgres::tls::NoTlsStream;
        type TlsConnect = tokio_postgres::NoTls;
        type Error = std::io::Error;

        fn make_tls_connect(&mut self, _domain: &str) -> std::io::Result<Self::TlsConnect> {
            *self.0.lock().unwrap() = Some(std::thread::current().id());
            Ok(tokio_postgres::NoTls)
        }
    }

    #[test]
    fn the_handshake_runs_off_the_runtimes_worker() {
        // A listener that never answers: the handshake starts, then the
        // connect timeout ends it. On a current-thread runtime the worker is
        // this thread, so a handshake run here would stall every other task.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(listener.local_addr().unwrap().port())
            .user("fencelock")
            .connect_timeout(std::time::Duration::from_millis(200));
        let ran_on = Arc::new(std::sync::Mutex::new(None));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let result = runtime.block_on(connect_off_the_workers(&config, RecordsTheThread(ran_on.clone())));

        let failure = result
            .err()
            .expect("a listener that never answers gives no session")
            .classify();
        assert_eq!(failure.kind, ErrorKind::Unavailable);
        assert!(failure.detail.contains("connect timeout"), "{}", failure.detail);
        let ran_on = ran_on.lock().unwrap().expect("the handshake started");
        assert_ne!(ran_on, std::thread::current().id());
    }
}

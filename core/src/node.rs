//! One Redis endpoint: a lazily (re)connected multiplexed connection, a hard
//! per-request timeout, and scripts by `EVALSHA` with `NOSCRIPT` recovery.
//!
//! There are no hidden retries here: a request gets one try within the
//! per-node timeout, and the caller (quorum logic, retry loop, watchdog)
//! decides what to do next.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Cmd, RedisError, RedisResult, Value};

use crate::deadline::within;
use crate::endpoint::{Endpoint, Topology};
use crate::error::{Error, ErrorKind, NodeFailure, NodeOutcome, Result, classify_redis_error};
use crate::scripts::LuaScript;
use crate::tls::{OwnTls, TlsMaterial};

/// What a node needs to connect.
pub(crate) struct NodeSettings {
    pub(crate) request_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) tls: TlsMaterial,
}

// One per node, built once: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Factory {
    Standalone(redis::Client),
    /// A `rediss://` node with TLS settings redis-rs cannot apply.
    OwnTls(OwnTls),
    Cluster(redis::cluster::ClusterClient),
}

#[derive(Clone)]
enum Connection {
    Standalone(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Connection {
    async fn query(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Connection::Standalone(c) => c.req_packed_command(cmd).await,
            Connection::Cluster(c) => c.req_packed_command(cmd).await,
        }
    }

    /// Every command's reply of a pipeline made by [`pipeline`]: one round trip on a single
    /// node; on a cluster, concurrent requests (a cluster pipeline would span
    /// slots), which its multiplexed connections pipeline per shard.
    async fn query_all(&mut self, pipe: &redis::Pipeline) -> RedisResult<Vec<RedisResult<Value>>> {
        let replies: Vec<RedisResult<Value>> = match self {
            Connection::Standalone(c) => pipe.query_async(c).await?,
            Connection::Cluster(c) => {
                let requests = pipe.cmd_iter().map(|cmd| {
                    let mut c = c.clone();
                    async move { c.req_packed_command(cmd).await }
                });
                futures_util::future::join_all(requests).await
            }
        };
        Ok(replies.into_iter().map(server_error_as_err).collect())
    }
}

/// One Redis master (or one Redis Cluster) of a client.
///
/// It keeps two multiplexed connections: the *foreground* one carries the
/// callers' acquire, extend and release requests and lives on the runtime of
/// the caller that opened it, so the hot path never hops between runtimes;
/// the *background* one carries the watchdog's renewals and lives on the
/// internal runtime, so renewals go on even while a caller's runtime is busy
/// or gone. A foreground connection whose runtime is gone fails at once and
/// is reopened where the next caller runs.
pub(crate) struct Node {
    endpoint: Endpoint,
    request_timeout: Duration,
    connect_timeout: Duration,
    factory: Factory,
    foreground: Slot,
    background: Slot,
}

/// Where a slot's connection task runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Home {
    /// The caller's tokio runtime, if there is one; the internal runtime otherwise.
    Caller,
    /// Always the internal runtime.
    Internal,
}

/// One lazily (re)opened connection.
struct Slot {
    home: Home,
    connection: Mutex<Option<Connection>>,
    /// Serialises connection attempts so a burst of requests opens one socket.
    connecting: tokio::sync::Mutex<()>,
}

impl Slot {
    fn new(home: Home) -> Self {
        Slot {
            home,
            connection: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Connection>> {
        // A poisoned slot only means a panic elsewhere while holding it; the
        // Option inside is still valid.
        self.connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn cached(&self) -> Option<Connection> {
        self.lock().clone()
    }
}

/// The raw reply of one node to one request, before quorum logic reads it.
pub(crate) type Reply = std::result::Result<Value, NodeOutcome>;

impl Node {
    pub(crate) fn new(endpoint: Endpoint, settings: &NodeSettings) -> Result<Self> {
        let mut info = endpoint.connection_info()?;
        let mut redis_info = info.redis_settings().clone();
        if let Some(user) = &settings.username {
            redis_info = redis_info.set_username(user);
        }
        if let Some(password) = &settings.password {
            redis_info = redis_info.set_password(password);
        }
        info = info.set_redis_settings(redis_info);
        let certs = redis::TlsCertificates {
            client_tls: settings
                .tls
                .client_cert_pem
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: settings.tls.root_ca_pem.clone(),
        };
        let has_custom_tls = certs.client_tls.is_some() || certs.root_cert.is_some();
        let own_tls = endpoint.tls && settings.tls.needs_own_handshake();
        let factory = match endpoint.topology {
            Topology::Standalone if own_tls => {
                Factory::OwnTls(OwnTls::new(&info, &settings.tls, &endpoint.to_string())?)
            }
            Topology::Cluster if own_tls => {
                return Err(Error::config(format!(
                    "node {endpoint}: a TLS minimum version above 1.2 cannot be applied to a Redis Cluster \
                     (redis-rs builds its TLS); set tls-protocols on the cluster's nodes instead"
                )));
            }
            Topology::Standalone if endpoint.tls && has_custom_tls => Factory::Standalone(
                redis::Client::build_with_tls(info, certs).map_err(|e| config_error(&endpoint, e))?,
            ),
            Topology::Standalone => {
                Factory::Standalone(redis::Client::open(info).map_err(|e| config_error(&endpoint, e))?)
            }
            Topology::Cluster => {
                let mut builder = redis::cluster::ClusterClientBuilder::new(vec![info])
                    .retries(0)
                    .connection_timeout(settings.connect_timeout)
                    .response_timeout(settings.request_timeout);
                if endpoint.tls && has_custom_tls {
                    builder = builder.certs(certs);
                }
                Factory::Cluster(builder.build().map_err(|e| config_error(&endpoint, e))?)
            }
        };
        Ok(Node {
            endpoint,
            request_timeout: settings.request_timeout,
            connect_timeout: settings.connect_timeout,
            factory,
            foreground: Slot::new(Home::Caller),
            background: Slot::new(Home::Internal),
        })
    }

    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Opens the connection now (bounded by the connect timeout) so the first
    /// lock does not pay for it. Returns the failure for the caller to judge.
    pub(crate) async fn warm_up(&self) -> std::result::Result<(), NodeOutcome> {
        let both = async {
            let (fg, bg) = tokio::join!(
                self.connection(&self.foreground),
                self.connection(&self.background)
            );
            fg.and(bg)
        };
        match within(self.connect_timeout, both).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(err)) => Err(NodeOutcome::Failed(classify_redis_error(&err))),
            Err(_) => Err(NodeOutcome::TimedOut),
        }
    }

    /// Runs one script on this node within the per-node timeout.
    pub(crate) async fn eval(&self, script: &'static LuaScript, keys: &[&str], args: &[&str]) -> Reply {
        self.eval_prepared(&Prepared::new(script, keys, args)).await
    }

    /// Runs a prepared script call (the same call may go to every node).
    pub(crate) async fn eval_prepared(&self, call: &Prepared) -> Reply {
        let request = async {
            let slot = &self.foreground;
            let mut conn = self.connection(slot).await?;
            let mut result = call.run(&mut conn).await;
            if let Err(err) = &result
                && self.forget_if_broken(slot, err)
            {
                // The socket was found dead (the node restarted, or the runtime
                // that drove it is gone): one fresh connection, still inside the
                // same per-node deadline.
                let mut conn = self.connection(slot).await?;
                result = call.run(&mut conn).await;
                if let Err(err) = &result {
                    self.forget_if_broken(slot, err);
                }
            }
            result
        };
        match within(self.request_timeout, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(NodeOutcome::Failed(classify_redis_error(&err))),
            Err(_) => Err(NodeOutcome::TimedOut),
        }
    }

    /// Runs a pipeline of `EVALSHA` calls (one round trip) within the
    /// per-node timeout; used by the watchdog to renew many locks. When the
    /// node lost its script cache, runs `fallback()` (the same calls as `EVAL`,
    /// which re-caches the script) instead: re-running renewals is harmless,
    /// and `EVAL` needs no `SCRIPT LOAD` right.
    pub(crate) async fn eval_pipeline(
        &self,
        calls: &redis::Pipeline,
        fallback: impl Fn() -> redis::Pipeline,
    ) -> std::result::Result<Vec<Reply>, NodeOutcome> {
        let request = async {
            let mut conn = self.connection(&self.background).await?;
            let mut replies = conn.query_all(calls).await;
            if let Ok(first) = &replies
                && first.iter().any(|r| matches!(r, Err(e) if is_noscript(e)))
            {
                replies = conn.query_all(&fallback()).await;
            }
            if let Err(err) = &replies {
                self.forget_if_broken(&self.background, err);
            }
            replies
        };
        match within(self.request_timeout, request).await {
            Ok(Ok(replies)) => Ok(replies.into_iter().map(reply_from).collect()),
            Ok(Err(err)) => Err(NodeOutcome::Failed(classify_redis_error(&err))),
            Err(_) => Err(NodeOutcome::TimedOut),
        }
    }

    async fn connection(&self, slot: &Slot) -> RedisResult<Connection> {
        if let Some(conn) = slot.cached() {
            return Ok(conn);
        }
        // Boxed: connecting is rare, and its state (a TLS handshake among
        // others) would otherwise sit inline in every request's future, to be
        // allocated and moved with it: a release's future was 10 KB, not 1.3 KB.
        Box::pin(self.open_connection(slot)).await
    }

    /// Opens the slot's connection, unless another request just did.
    async fn open_connection(&self, slot: &Slot) -> RedisResult<Connection> {
        let _gate = slot.connecting.lock().await;
        if let Some(conn) = slot.cached() {
            return Ok(conn);
        }
        let connect = self.factory.clone().connect(self.connect_timeout);
        let conn = if slot.home == Home::Caller && tokio::runtime::Handle::try_current().is_ok() {
            connect.await?
        } else {
            crate::runtime::on_core(connect)
                .await
                .map_err(|e| RedisError::from(std::io::Error::other(e.to_string())))??
        };
        tracing::debug!(node = %self.endpoint, "connected");
        *slot.lock() = Some(conn.clone());
        Ok(conn)
    }

    /// Drops the cached connection after an error that means the socket is
    /// gone, so the next request reconnects. Timeouts keep the connection: the
    /// requests already written stay ordered before any later cleanup.
    fn forget_if_broken(&self, slot: &Slot, err: &RedisError) -> bool {
        let broken = err.is_io_error() || err.is_connection_dropped() || err.is_unrecoverable_error();
        if broken {
            tracing::debug!(node = %self.endpoint, error = %err, "connection dropped; will reconnect");
            *slot.lock() = None;
        }
        broken
    }
}

impl Factory {
    async fn connect(self, connect_timeout: Duration) -> RedisResult<Connection> {
        match self {
            Factory::Standalone(client) => {
                let config = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(connect_timeout))
                    .set_response_timeout(None);
                let mut conn = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                preload_scripts(&mut conn).await;
                Ok(Connection::Standalone(conn))
            }
            Factory::OwnTls(tls) => {
                let mut conn = tls.connect(connect_timeout).await?;
                preload_scripts(&mut conn).await;
                Ok(Connection::Standalone(conn))
            }
            Factory::Cluster(client) => Ok(Connection::Cluster(client.get_async_connection().await?)),
        }
    }
}

/// Loads every script in one round trip so the first calls need no `NOSCRIPT`
/// fallback. Best effort: a user without `SCRIPT LOAD` rights still works
/// through the `EVAL` fallback.
async fn preload_scripts(conn: &mut redis::aio::MultiplexedConnection) {
    let mut pipe = pipeline();
    for script in crate::scripts::all() {
        pipe.cmd("SCRIPT").arg("LOAD").arg(script.source);
    }
    let _: RedisResult<Vec<RedisResult<Value>>> = pipe.query_async(conn).await;
}

/// A script call built once and sent to any number of nodes. It owns its
/// command, so requests still on their way when a quorum decides can be
/// left to finish in the background.
pub(crate) struct Prepared {
    script: &'static LuaScript,
    evalsha: Cmd,
}

impl Prepared {
    pub(crate) fn new(script: &'static LuaScript, keys: &[&str], args: &[&str]) -> Self {
        Prepared {
            script,
            evalsha: evalsha_cmd(script, keys, args),
        }
    }

    /// `EVALSHA`, falling back to `EVAL` (which also re-caches the script) when
    /// the node lost its script cache (restart, `SCRIPT FLUSH`). `EVAL` rather
    /// than `SCRIPT LOAD` keeps the ACL needs to `EVAL`/`EVALSHA`.
    async fn run(&self, conn: &mut Connection) -> RedisResult<Value> {
        match server_error_as_err(conn.query(&self.evalsha).await) {
            Err(err) if is_noscript(&err) => server_error_as_err(conn.query(&self.eval()).await),
            other => other,
        }
    }

    /// The same call as `EVAL`: `EVALSHA sha n keys… args…` with its first
    /// two words replaced.
    fn eval(&self) -> Cmd {
        let mut eval = Cmd::new();
        eval.arg("EVAL").arg(self.script.source);
        for word in self.evalsha.args_iter().skip(2) {
            if let redis::Arg::Simple(bytes) = word {
                eval.arg(bytes);
            }
        }
        eval
    }
}

/// Error replies may arrive as values; treat them as errors in one place.
fn server_error_as_err(result: RedisResult<Value>) -> RedisResult<Value> {
    match result {
        Ok(Value::ServerError(err)) => Err(err.into()),
        other => other,
    }
}

fn reply_from(result: RedisResult<Value>) -> Reply {
    match server_error_as_err(result) {
        Ok(value) => Ok(value),
        Err(err) => Err(NodeOutcome::Failed(classify_redis_error(&err))),
    }
}

/// An empty pipeline that returns each command's error in place instead of
/// failing as a whole, as [`Node::eval_pipeline`] expects.
pub(crate) fn pipeline() -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe
}

/// The `EVALSHA` command for one script call.
pub(crate) fn evalsha_cmd(script: &LuaScript, keys: &[&str], args: &[&str]) -> Cmd {
    script_cmd("EVALSHA", script.sha(), keys, args)
}

/// The `EVAL` command for one script call (the fallback that re-caches it).
pub(crate) fn eval_cmd(script: &LuaScript, keys: &[&str], args: &[&str]) -> Cmd {
    script_cmd("EVAL", script.source, keys, args)
}

/// `NAME script numkeys keys… args…`, its buffers sized up front: growing
/// them argument by argument was a measurable share of a lock cycle's CPU.
fn script_cmd(name: &str, script: &str, keys: &[&str], args: &[&str]) -> Cmd {
    let words = keys.iter().chain(args);
    let count = 3 + keys.len() + args.len();
    let bytes = name.len() + script.len() + 20 + words.clone().map(|w| w.len()).sum::<usize>();
    let mut cmd = Cmd::with_capacity(count, bytes);
    cmd.arg(name).arg(script).arg(keys.len());
    for word in words {
        cmd.arg(*word);
    }
    cmd
}

fn is_noscript(err: &RedisError) -> bool {
    err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

fn config_error(endpoint: &Endpoint, err: RedisError) -> Error {
    let failure: NodeFailure = classify_redis_error(&err);
    let kind = if failure.kind == ErrorKind::Tls {
        ErrorKind::Tls
    } else {
        ErrorKind::Config
    };
    Error::new(kind, format!("cannot set up node {endpoint}: {}", failure.detail))
}

/// Reads an integer reply (scripts return integers or decimal strings).
pub(crate) fn as_i64(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

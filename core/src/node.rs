//! One Redis endpoint: its two connections (see [`crate::connection`]), a
//! hard per-request timeout, and scripts by `EVALSHA` with `NOSCRIPT`
//! recovery.
//!
//! There are no hidden retries here: a request gets one try within the
//! per-node timeout, and the caller (quorum logic, retry loop, watchdog)
//! decides what to do next.

use std::time::{Duration, Instant};

use redis::{Cmd, ConnectionAddr, RedisError, Value};

use crate::connection::{Direct, Factory, Home, Live, Sent, Slot, tcp_settings};
use crate::deadline::{Elapsed, within};
use crate::endpoint::{Endpoint, Topology};
use crate::error::{Error, ErrorKind, NodeFailure, NodeOutcome, Result, classify_redis_error};
use crate::persistence::PersistencePolicy;
use crate::postgres::PgFactory;
use crate::scripts::LuaScript;
use crate::set_if_equal::{IfEqSupport, Known, Shortcut, probe_then_script};
use crate::store::{Messages, StoreError};
use crate::tls::{Handshake, TlsMaterial};

/// What a node needs to connect.
pub(crate) struct NodeSettings {
    pub(crate) request_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) tls: TlsMaterial,
    /// Refuse nodes that do not run AOF ([`crate::persistence`]).
    pub(crate) require_aof: bool,
}

/// Keys a `SCAN` page asks for.
const SCAN_PAGE: usize = 1000;

/// One Redis master (or one Redis Cluster) of a client.
///
/// It keeps two multiplexed connections: the *foreground* one carries the
/// callers' acquire and release requests and lives on the runtime of the
/// caller that opened it, so the hot path never hops between runtimes; the
/// *background* one carries every request that changes a held lock's ttl
/// (the watchdog's renewals and `extend`) and lives on the internal runtime,
/// so renewals go on even while a caller's runtime is busy or gone, and a
/// lock's ttl changes reach each node in the order they were sent. A
/// foreground connection whose runtime is gone fails, and is reopened in the
/// background where the next caller runs.
pub(crate) struct Node {
    endpoint: Endpoint,
    request_timeout: Duration,
    connect_timeout: Duration,
    foreground: Slot,
    background: Slot,
    /// For the wake-up subscription ([`crate::wake`]).
    factory: Factory,
    /// Whether re-takes may go as plain commands ([`crate::set_if_equal`]).
    if_eq: IfEqSupport,
}

/// The raw reply of one node to one request, before quorum logic reads it.
pub(crate) type Reply = std::result::Result<Value, NodeOutcome>;

/// Whether a request reached its node, for rules that depend on what a
/// node may still apply later (docs/protocol.md §4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Never sent: no connection was up.
    NotSent,
    /// Answered on the slot's connection number `generation`: the node has
    /// run it, and every request sent before it on that connection.
    Answered(u32),
    /// Sent on connection `generation` without an answer (timed out, broken,
    /// or not back yet): the node may still run it later.
    Unknown(u32),
}

impl Node {
    pub(crate) fn new(endpoint: Endpoint, settings: &NodeSettings) -> Result<Self> {
        let factory = factory(&endpoint, settings)?;
        // One per node: both connections share whether the user was warned.
        let persistence = PersistencePolicy::new(settings.require_aof);
        let slot = |home| {
            Slot::new(
                home,
                endpoint.to_string(),
                factory.clone(),
                persistence.clone(),
                settings.connect_timeout,
            )
        };
        let if_eq = match endpoint.topology {
            Topology::Standalone => IfEqSupport::probed(),
            Topology::Cluster | Topology::Postgres => IfEqSupport::never(),
        };
        Ok(Node {
            if_eq,
            foreground: slot(Home::Caller),
            background: slot(Home::Internal),
            factory,
            endpoint,
            request_timeout: settings.request_timeout,
            connect_timeout: settings.connect_timeout,
        })
    }

    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Opens both connections now (bounded by the connect timeout) so the
    /// first lock does not pay for it. Returns the failure for the caller to judge.
    pub(crate) async fn warm_up(&self) -> std::result::Result<(), NodeOutcome> {
        let deadline = Instant::now() + self.connect_timeout;
        let (fg, bg) = tokio::join!(
            self.foreground.live_by(deadline, false),
            self.background.live_by(deadline, false)
        );
        fg.and(bg).map(drop)
    }

    /// A subscription to `channel` on a connection of its own, opened
    /// within the connect timeout (see [`crate::wake`]).
    pub(crate) async fn subscribe(&self, channel: &str) -> std::result::Result<Messages, StoreError> {
        within(self.connect_timeout, self.factory.subscribe(channel))
            .await
            .map_err(|Elapsed| {
                StoreError::refused(
                    ErrorKind::Unavailable,
                    "subscribing took longer than the connect timeout",
                )
            })?
    }

    /// The background connection (ttl changes of held locks), or the failure
    /// to report for this node now. Never waits: a request whose connection
    /// is not known when it is sent could not be told apart from one that
    /// may still land (see [`crate::lease`]).
    pub(crate) fn background(&self) -> std::result::Result<Live, NodeOutcome> {
        self.background.live()
    }

    /// Runs one script on the foreground connection within the per-node
    /// timeout (see [`Node::eval_prepared`]).
    pub(crate) async fn eval(&self, script: &'static LuaScript, keys: &[&str], args: &[&str]) -> Reply {
        self.eval_prepared(&Prepared::new(script, keys, args)).await
    }

    /// Runs a prepared script call (the same call may go to every node) on
    /// the foreground connection within the per-node timeout. Without a
    /// connection up it waits, within that same timeout, for the attempt
    /// under way, or starts one (after the short pause that follows a
    /// failed one), and fails as soon as that attempt fails. An attempt that
    /// outlasts the request goes on in the background, bounded by the
    /// connect timeout.
    pub(crate) async fn eval_prepared(&self, call: &Prepared) -> Reply {
        let deadline = Instant::now() + self.request_timeout;
        let live = match self.foreground.live() {
            Ok(live) => live,
            Err(_) => self.foreground.live_by(deadline, false).await?,
        };
        self.send(live, call, deadline.saturating_duration_since(Instant::now()))
            .await
    }

    /// [`Node::eval_prepared`] for work that may wait: if no connection is
    /// up, waits up to `patience` for the background reconnect first.
    pub(crate) async fn eval_patiently(&self, call: &Prepared, patience: Duration) -> Reply {
        let live = self.foreground.live_by(Instant::now() + patience, true).await?;
        self.send(live, call, self.request_timeout).await
    }

    /// Sends `call` on `live` once and waits for the reply for up to `limit`.
    pub(crate) async fn send(&self, mut live: Live, call: &Prepared, limit: Duration) -> Reply {
        let outcome = within(
            limit,
            call.run(&mut live.connection, &self.if_eq, live.generation),
        )
        .await;
        settled(&live, outcome)
    }

    /// Installs or upgrades the PostgreSQL schema of this node; `None` for a
    /// Redis node, which has nothing to install (scripts load on use).
    pub(crate) async fn migrate(&self) -> Option<std::result::Result<(), NodeFailure>> {
        let Factory::Postgres(postgres) = &self.factory else {
            return None;
        };
        let migrated = within(self.connect_timeout * 4, postgres.migrate()).await;
        Some(match migrated {
            Ok(done) => done.map_err(|e| e.classify()),
            Err(Elapsed) => Err(NodeFailure {
                kind: ErrorKind::Unavailable,
                detail: "the migration took longer than four connect timeouts".to_owned(),
            }),
        })
    }

    /// Why [`Node::scan`] cannot list this node's keys, if it cannot.
    pub(crate) fn unscannable(&self) -> Option<&'static str> {
        match self.endpoint.topology {
            Topology::Standalone | Topology::Postgres => None,
            Topology::Cluster => Some("a Redis Cluster, whose locks one SCAN cannot list"),
        }
    }

    /// The keys matching `pattern` (a Redis glob), at most `limit`, read a
    /// `SCAN` page at a time, each page within the per-node timeout. On a
    /// standalone node only: a cluster would answer from one shard.
    pub(crate) async fn scan(
        &self,
        pattern: &str,
        limit: usize,
    ) -> std::result::Result<Vec<String>, NodeOutcome> {
        let mut keys = Vec::new();
        let mut cursor = 0_u64;
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(SCAN_PAGE);
            let (next, page): (u64, Vec<Vec<u8>>) = redis::from_redis_value(self.query(&scan).await?)
                .map_err(|e| {
                    NodeOutcome::Failed(NodeFailure {
                        kind: ErrorKind::Unavailable,
                        detail: format!("SCAN replied {e}"),
                    })
                })?;
            // A key that is not UTF-8 is not one of ours.
            keys.extend(page.into_iter().filter_map(|key| String::from_utf8(key).ok()));
            if next == 0 || keys.len() >= limit {
                keys.truncate(limit);
                return Ok(keys);
            }
            cursor = next;
        }
    }

    /// Runs one command on the foreground connection within the per-node
    /// timeout, as [`Node::eval_prepared`] runs a script.
    async fn query(&self, cmd: &Cmd) -> Reply {
        let deadline = Instant::now() + self.request_timeout;
        let mut live = match self.foreground.live() {
            Ok(live) => live,
            Err(_) => self.foreground.live_by(deadline, false).await?,
        };
        let limit = deadline.saturating_duration_since(Instant::now());
        let outcome = within(limit, live.connection.query(cmd)).await;
        settled(&live, outcome)
    }

    /// The per-node timeout.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Runs a pipeline of `EVAL` calls (one round trip) on `live` within the
    /// per-node timeout; used by the watchdog to renew many locks. `EVAL`,
    /// not `EVALSHA`: a renewal is a ttl change, never sent twice
    /// ([`Prepared::ttl_change`]).
    pub(crate) async fn eval_pipeline(
        &self,
        mut live: Live,
        calls: &redis::Pipeline,
    ) -> std::result::Result<Vec<Reply>, NodeOutcome> {
        let outcome = within(self.request_timeout, live.connection.query_all(calls)).await;
        settled(&live, outcome).map(|replies| replies.into_iter().map(reply_from).collect())
    }
}

/// What a request on `live` came to, told to its connection (see
/// [`Live::settle`]): the value, or the node's outcome.
fn settled<T>(
    live: &Live,
    outcome: std::result::Result<std::result::Result<T, StoreError>, Elapsed>,
) -> std::result::Result<T, NodeOutcome> {
    match outcome {
        Ok(Ok(value)) => {
            live.settle(Sent::Answered);
            Ok(value)
        }
        Ok(Err(err)) => {
            live.settle(Sent::Failed(&err));
            Err(NodeOutcome::Failed(err.classify()))
        }
        Err(Elapsed) => {
            live.settle(Sent::TimedOut);
            Err(NodeOutcome::TimedOut)
        }
    }
}

/// How this node's connections are made.
fn factory(endpoint: &Endpoint, settings: &NodeSettings) -> Result<Factory> {
    if endpoint.topology == Topology::Postgres {
        return Ok(Factory::Postgres(PgFactory::new(endpoint, settings)?));
    }
    let info = endpoint.connection_info()?;
    let mut redis_info = info.redis_settings().clone();
    if let Some(user) = &settings.username {
        redis_info = redis_info.set_username(user);
    }
    if let Some(password) = &settings.password {
        redis_info = redis_info.set_password(password);
    }
    match endpoint.topology {
        Topology::Standalone => {
            let (host, port) = match info.addr() {
                ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                    (host.clone(), *port)
                }
                other => {
                    return Err(Error::config(format!(
                        "node {endpoint}: unsupported address {other}"
                    )));
                }
            };
            let tls = endpoint
                .tls
                .then(|| Handshake::new(&host, &settings.tls, &endpoint.to_string()))
                .transpose()?;
            Ok(Factory::Direct(Direct {
                host,
                port,
                tls,
                redis: redis_info,
            }))
        }
        Topology::Postgres => unreachable!("returned above"),
        Topology::Cluster if endpoint.tls && settings.tls.raises_minimum() => Err(Error::config(format!(
            "node {endpoint}: a TLS minimum version above 1.2 cannot be applied to a Redis Cluster \
             (redis-rs builds its TLS); set tls-protocols on the cluster's nodes instead"
        ))),
        Topology::Cluster => {
            let tcp = tcp_settings(info.tcp_settings().clone());
            let info = info.set_redis_settings(redis_info);
            let seed_info = info.clone().set_tcp_settings(tcp.clone());
            let mut builder = redis::cluster::ClusterClientBuilder::new(vec![info])
                .retries(0)
                .tcp_settings(tcp)
                .connection_timeout(settings.connect_timeout)
                .response_timeout(settings.request_timeout);
            let certs =
                redis::TlsCertificates {
                    client_tls: settings.tls.client_cert_pem.as_ref().map(|(cert, key)| {
                        redis::ClientTlsConfig {
                            client_cert: cert.clone(),
                            client_key: key.clone(),
                        }
                    }),
                    root_cert: settings.tls.root_ca_pem.clone(),
                };
            let seed = if endpoint.tls && (certs.client_tls.is_some() || certs.root_cert.is_some()) {
                redis::Client::build_with_tls(seed_info, certs.clone())
            } else {
                redis::Client::open(seed_info)
            }
            .map_err(|e| config_error(endpoint, e))?;
            if endpoint.tls && (certs.client_tls.is_some() || certs.root_cert.is_some()) {
                builder = builder.certs(certs);
            }
            Ok(Factory::Cluster {
                cluster: builder.build().map_err(|e| config_error(endpoint, e))?,
                seed,
            })
        }
    }
}

/// A script call built once and sent to any number of nodes. It owns its
/// command, so requests still on their way when a quorum decides can be
/// left to finish in the background.
pub(crate) struct Prepared {
    script: &'static LuaScript,
    /// `EVALSHA`, or `EVAL` for a ttl change.
    cmd: Cmd,
    /// The same call as plain commands, for nodes that have `SET … IFEQ`.
    shortcut: Option<Shortcut>,
}

impl Prepared {
    pub(crate) fn new<A: AsRef<[u8]>>(script: &'static LuaScript, keys: &[&str], args: &[A]) -> Self {
        Prepared {
            script,
            cmd: evalsha_cmd(script, keys, args),
            shortcut: Shortcut::for_call(script, keys, args),
        }
    }

    /// An ACQUIRE that takes back the key its client's lingering release
    /// reserved ([`crate::linger`]): [`Prepared::new`], which a node with
    /// `SET … IFEQ` runs as [`Shortcut::retake`].
    pub(crate) fn retake<A: AsRef<[u8]>>(script: &'static LuaScript, keys: &[&str], args: &[A]) -> Self {
        debug_assert!(
            std::ptr::eq(script, &*crate::scripts::ACQUIRE),
            "a lock's ACQUIRE"
        );
        Prepared {
            shortcut: Shortcut::retake(keys, args),
            ..Prepared::new(script, keys, args)
        }
    }

    /// A call that changes a held key's ttl, sent as `EVAL` so that it never
    /// needs a second send. The `EVAL` fallback of an `EVALSHA` that found no
    /// script would go out once the `NOSCRIPT` came back, after whatever the
    /// client sent on that connection meanwhile: a later ttl change, answered
    /// first, would then be undone by the older one, while the holder counts
    /// the later ttl (docs/protocol.md §4.5).
    pub(crate) fn ttl_change<A: AsRef<[u8]>>(script: &'static LuaScript, keys: &[&str], args: &[A]) -> Self {
        Prepared {
            script,
            cmd: eval_cmd(script, keys, args),
            shortcut: None,
        }
    }

    /// The call on the connection numbered `generation`: its shortcut where
    /// the node's probe found `IFEQ` there and the shortcut decides, or else
    /// the script, with the probe before it when none was made there yet
    /// ([`crate::set_if_equal`]). An `EVALSHA` falls back to `EVAL` (which
    /// also re-caches the script) when the node lost its script cache
    /// (restart, `SCRIPT FLUSH`). `EVAL` rather than `SCRIPT LOAD` keeps the
    /// ACL needs to `EVAL`/`EVALSHA`.
    async fn run(
        &self,
        conn: &mut crate::connection::Connection,
        if_eq: &IfEqSupport,
        generation: u32,
    ) -> std::result::Result<Value, StoreError> {
        let reply = match &self.shortcut {
            Some(shortcut) => match if_eq.on(generation) {
                Known::With => match shortcut.run(conn, if_eq).await {
                    Some(reply) => return reply,
                    None => conn.query(&self.cmd).await,
                },
                Known::Unknown => probe_then_script(conn, shortcut, &self.cmd, if_eq, generation).await,
                Known::Without => conn.query(&self.cmd).await,
            },
            None => conn.query(&self.cmd).await,
        };
        match reply {
            Err(err) if err.is_noscript() => conn.query(&self.eval()).await,
            other => other,
        }
    }

    /// The same call as `EVAL`: `EVALSHA sha n keys… args…` with its first
    /// two words replaced.
    fn eval(&self) -> Cmd {
        let mut eval = Cmd::new();
        eval.arg("EVAL").arg(self.script.source);
        for word in self.cmd.args_iter().skip(2) {
            if let redis::Arg::Simple(bytes) = word {
                eval.arg(bytes);
            }
        }
        eval
    }
}

fn reply_from(result: std::result::Result<Value, StoreError>) -> Reply {
    result.map_err(|err| NodeOutcome::Failed(err.classify()))
}

/// The `EVALSHA` command for one script call.
pub(crate) fn evalsha_cmd<A: AsRef<[u8]>>(script: &LuaScript, keys: &[&str], args: &[A]) -> Cmd {
    script_cmd("EVALSHA", script.sha(), keys, args)
}

/// The `EVAL` command for one script call (the fallback that re-caches it).
pub(crate) fn eval_cmd<A: AsRef<[u8]>>(script: &LuaScript, keys: &[&str], args: &[A]) -> Cmd {
    script_cmd("EVAL", script.source, keys, args)
}

/// `NAME script numkeys keys… args…`, its buffers sized up front: growing
/// them argument by argument was a measurable share of a lock cycle's CPU.
fn script_cmd<A: AsRef<[u8]>>(name: &str, script: &str, keys: &[&str], args: &[A]) -> Cmd {
    let words = keys
        .iter()
        .map(|key| key.as_bytes())
        .chain(args.iter().map(AsRef::as_ref));
    let count = 3 + keys.len() + args.len();
    let bytes = name.len() + script.len() + 20 + words.clone().map(<[u8]>::len).sum::<usize>();
    let mut cmd = Cmd::with_capacity(count, bytes);
    cmd.arg(name).arg(script).arg(keys.len());
    for word in words {
        cmd.arg(word);
    }
    cmd
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

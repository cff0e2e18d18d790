//! One connection to a node, opened in the background and replaced when it
//! breaks or stops answering.
//!
//! A request never opens a connection itself. It takes the connection that
//! is up, or fails at once for this node while a reconnect runs in the
//! background (clean-up work may wait for it instead). Reconnecting takes
//! several round trips (TCP, TLS, HELLO/AUTH, the script preload), so it is
//! bounded by the connect timeout, not by the much shorter per-request
//! timeout: a node behind a slow link still comes back after a disconnect.
//!
//! A request is sent at most once. After an I/O error nobody knows whether
//! it reached the node, so it counts as failed there (and callers undo what
//! it may have done); resending could find our own key and read it as
//! someone else's. The connection is replaced in the background.
//!
//! A connection whose requests keep timing out is replaced too: a NAT or
//! firewall that forgot the flow drops its packets for good while a new
//! connection works. TCP keepalive and `TCP_USER_TIMEOUT` let the kernel
//! notice a dead peer as well, idle or not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use std::future::Future;
use std::pin::Pin;

use futures_util::StreamExt;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::io::tcp::{TcpSettings, socket2};
use redis::{AsyncConnectionConfig, Cmd, RedisConnectionInfo, RedisResult, Value};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::deadline::{Elapsed, within};
use crate::error::{ErrorKind, NodeFailure, NodeOutcome};
use crate::persistence::{self, Persistence, PersistencePolicy};
use crate::postgres::{PgConnection, PgFactory};
use crate::store::{Messages, StoreError};
use crate::tls::Handshake;

/// Requests timing out this many times in a row on one connection, with no
/// reply in between, get the connection replaced.
pub(crate) const STALL_LIMIT: u32 = 3;

/// The pause after a failed connection attempt before the next may start,
/// so a node that refuses connections is not hammered by every request.
const RECONNECT_PAUSE: Duration = Duration::from_millis(20);

/// TCP keepalive on every node connection: the first probe after this much
/// idle time, then every [`KEEPALIVE_INTERVAL`], [`KEEPALIVE_PROBES`] times.
pub(crate) const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
pub(crate) const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
pub(crate) const KEEPALIVE_PROBES: u32 = 3;

/// `TCP_USER_TIMEOUT`: the kernel gives up on a connection whose sent data
/// stays unacknowledged this long.
pub(crate) const TCP_USER_TIMEOUT: Duration = Duration::from_secs(10);

/// Keepalive and user timeout on top of `base` (which keeps redis-rs's other settings).
pub(crate) fn tcp_settings(base: TcpSettings) -> TcpSettings {
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    base.set_keepalive(keepalive).set_user_timeout(TCP_USER_TIMEOUT)
}

/// Applies [`tcp_settings`]'s options to a socket opened by hand (our own TLS).
pub(crate) fn apply_tcp_settings(socket: &tokio::net::TcpStream) -> std::io::Result<()> {
    let socket = socket2::SockRef::from(socket);
    socket.set_tcp_keepalive(
        &socket2::TcpKeepalive::new()
            .with_time(KEEPALIVE_IDLE)
            .with_interval(KEEPALIVE_INTERVAL)
            .with_retries(KEEPALIVE_PROBES),
    )?;
    socket.set_tcp_user_timeout(Some(TCP_USER_TIMEOUT))
}

/// How a node's connections are made. One per node, built once: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub(crate) enum Factory {
    /// One Redis server, over a socket (and TLS) we open ourselves.
    Direct(Direct),
    /// A Redis Cluster, through redis-rs's cluster client; `seed` reaches
    /// the node the cluster was named by, for the wake-up subscription
    /// (a cluster passes every PUBLISH to all its nodes).
    Cluster {
        cluster: redis::cluster::ClusterClient,
        seed: redis::Client,
    },
    /// A PostgreSQL server (docs/postgres-store.md).
    Postgres(PgFactory),
}

/// A single Redis server reached over our own socket: its options are
/// ours to set, and the connection's task is ours to watch, so a closed
/// connection is noticed when it closes, not when a request next fails on it.
#[derive(Clone)]
pub(crate) struct Direct {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) tls: Option<Handshake>,
    pub(crate) redis: RedisConnectionInfo,
}

impl Factory {
    /// A new connection, and what the node says of its persistence. A
    /// direct connection's task is spawned on the current runtime and tells
    /// `ended` when it stops.
    async fn connect(self, ended: EndNotice) -> Result<(Connection, Persistence), StoreError> {
        match self {
            Factory::Direct(direct) => {
                let (mut conn, driver) = direct.open().await?;
                // On this runtime: a caller's connection dies with it.
                tokio::spawn(watched(driver, ended));
                let persistence = preload(&mut conn).await?;
                Ok((Connection::Standalone(conn), persistence))
            }
            Factory::Cluster { cluster, .. } => Ok((
                Connection::Cluster(cluster.get_async_connection().await?),
                Persistence::Unknown("a Redis Cluster node: check appendonly on every shard".to_owned()),
            )),
            Factory::Postgres(postgres) => postgres.connect(ended).await,
        }
    }
}

impl Factory {
    /// A new connection subscribed to `channel` alone, and its messages'
    /// payloads; they end when the connection does.
    pub(crate) async fn subscribe(&self, channel: &str) -> Result<Messages, StoreError> {
        let mut pubsub = match self {
            Factory::Direct(direct) => direct.open_pubsub().await?,
            Factory::Cluster { seed, .. } => seed.get_async_pubsub().await?,
            Factory::Postgres(postgres) => return postgres.subscribe(channel).await,
        };
        pubsub.subscribe(channel).await?;
        Ok(Box::pin(
            pubsub
                .into_on_message()
                .map(|message| message.get_payload_bytes().to_vec()),
        ))
    }
}

pub(crate) type Driver = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where a connection's end is reported: its slot and number, set once the
/// connection is installed (it may end before, and then nobody is told).
#[derive(Clone, Default)]
pub(crate) struct EndNotice(Arc<std::sync::OnceLock<(Weak<Shared>, u32)>>);

impl Direct {
    /// TCP with our socket options.
    async fn tcp(&self) -> RedisResult<TcpStream> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port)).await?;
        apply_tcp_settings(&tcp)?;
        Ok(tcp)
    }

    /// A subscriber connection: [`Direct::tcp`], TLS if asked for, then
    /// redis-rs's handshake.
    async fn open_pubsub(&self) -> RedisResult<redis::aio::PubSub> {
        let tcp = self.tcp().await?;
        // Wake-ups are latency-bound single messages: no batching wanted.
        tcp.set_nodelay(true)?;
        match &self.tls {
            Some(handshake) => redis::aio::PubSub::new(&self.redis, handshake.over(tcp).await?).await,
            None => redis::aio::PubSub::new(&self.redis, tcp).await,
        }
    }

    /// TCP (with our socket options), TLS if asked for, then redis-rs's
    /// handshake (HELLO, AUTH, SELECT) on the stream.
    async fn open(&self) -> RedisResult<(MultiplexedConnection, Driver)> {
        let tcp = self.tcp().await?;
        // Nagle's algorithm stays on, as redis-rs leaves it: under load it
        // gathers the pipelined requests of many callers into fewer segments,
        // which measured faster than sending each at once.
        tcp.set_nodelay(false)?;
        // Requests are timed by fencelock, never by redis-rs.
        let config = AsyncConnectionConfig::new().set_response_timeout(None);
        Ok(match &self.tls {
            Some(handshake) => {
                let stream = handshake.over(tcp).await?;
                let (conn, driver) =
                    MultiplexedConnection::new_with_config(&self.redis, stream, config).await?;
                (conn, Box::pin(driver))
            }
            None => {
                let (conn, driver) = MultiplexedConnection::new_with_config(&self.redis, tcp, config).await?;
                (conn, Box::pin(driver))
            }
        })
    }
}

/// In one round trip: loads a lock's scripts, so its first calls need no
/// `NOSCRIPT` fallback (best effort: a user without `SCRIPT LOAD` rights
/// still works through the `EVAL` fallback), and asks whether the node runs
/// AOF (see [`crate::persistence`]). A node that wants `AUTH` first fails
/// the connection here: a later request longer than ten words would only
/// get a protocol error from it ("unauthenticated multibulk length"), which
/// says less.
async fn preload(conn: &mut MultiplexedConnection) -> RedisResult<Persistence> {
    let mut pipe = pipeline();
    for script in crate::scripts::preloaded() {
        pipe.cmd("SCRIPT").arg("LOAD").arg(script.source);
    }
    pipe.add_command(persistence::question());
    let replies: RedisResult<Vec<RedisResult<Value>>> = pipe.query_async(conn).await;
    let mut replies = match replies {
        Ok(replies) => replies,
        Err(err) => return Ok(Persistence::Unknown(format!("CONFIG GET failed: {err}"))),
    };
    if let Some(refused) = replies
        .iter()
        .filter_map(|reply| server_error_as_err(reply.clone()).err())
        .find(|err| err.code() == Some("NOAUTH"))
    {
        return Err(refused);
    }
    Ok(match replies.pop() {
        Some(reply) => persistence::answer(reply),
        None => Persistence::Unknown("no reply to CONFIG GET".to_owned()),
    })
}

#[derive(Clone)]
pub(crate) enum Connection {
    Standalone(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
    /// Runs the script calls it is given as the SQL functions of the same scripts.
    Postgres(PgConnection),
}

impl Connection {
    /// One command's reply (an error reply as `Err`). A PostgreSQL
    /// connection takes script calls (`EVALSHA`, `EVAL`) only.
    pub(crate) async fn query(&mut self, cmd: &Cmd) -> Result<Value, StoreError> {
        let reply = match self {
            Connection::Standalone(c) => c.req_packed_command(cmd).await,
            Connection::Cluster(c) => c.req_packed_command(cmd).await,
            // Boxed: its future is far larger than redis-rs's, and every
            // Redis request's future would otherwise be as large.
            Connection::Postgres(c) => return Box::pin(c.run(cmd)).await,
        };
        Ok(server_error_as_err(reply)?)
    }

    /// Every command's reply of a pipeline made by [`pipeline`]:
    /// one round trip on a single node; on a cluster, concurrent requests (a
    /// cluster pipeline would span slots), which its multiplexed connections
    /// pipeline per shard.
    pub(crate) async fn query_all(
        &mut self,
        pipe: &redis::Pipeline,
    ) -> Result<Vec<Result<Value, StoreError>>, StoreError> {
        let replies: Vec<RedisResult<Value>> = match self {
            Connection::Standalone(c) => pipe.query_async(c).await?,
            Connection::Cluster(c) => {
                let requests = pipe.cmd_iter().map(|cmd| {
                    let mut c = c.clone();
                    async move { c.req_packed_command(cmd).await }
                });
                futures_util::future::join_all(requests).await
            }
            Connection::Postgres(c) => return Ok(Box::pin(c.run_all(pipe)).await),
        };
        Ok(replies
            .into_iter()
            .map(|reply| server_error_as_err(reply).map_err(StoreError::from))
            .collect())
    }
}

/// Where a slot's connection task runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Home {
    /// The caller's tokio runtime, if there is one; the internal runtime otherwise.
    Caller,
    /// Always the internal runtime.
    Internal,
}

/// One connection of a node, kept up in the background.
pub(crate) struct Slot(Arc<Shared>);

struct Shared {
    home: Home,
    /// The node, without credentials, for logs.
    node: String,
    factory: Factory,
    persistence: PersistencePolicy,
    connect_timeout: Duration,
    state: Mutex<State>,
    /// Whether a request timed out on the live connection since its last
    /// answer (`State::timeouts_in_a_row > 0`), readable without the lock.
    timed_out: AtomicBool,
    /// Wakes requests waiting for a connection when an attempt ends.
    changed: Notify,
}

#[derive(Default)]
struct State {
    live: Option<Connection>,
    /// Numbers the connections of this slot; requests sent on one connection
    /// run in order, which [`Live::generation`] lets callers rely on.
    generation: u32,
    /// Requests timed out in a row on the live connection.
    timeouts_in_a_row: u32,
    /// A background attempt is under way.
    connecting: bool,
    /// Why no connection is up: the last failed attempt or break.
    down: Option<NodeFailure>,
    /// No new attempt before this (after a failed one).
    pause_until: Option<Instant>,
    /// Attempts ended so far.
    attempts_ended: u64,
}

/// The connection a request goes out on.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) connection: Connection,
    /// Which of the slot's connections this is.
    pub(crate) generation: u32,
    slot: Arc<Shared>,
}

/// What became of a request, for [`Live::settle`].
pub(crate) enum Sent<'a> {
    /// The node answered (with a value or an error reply).
    Answered,
    /// The request failed: an error reply (the node answered) or a broken
    /// connection (nobody knows whether it reached the node).
    Failed(&'a StoreError),
    /// No answer within the per-node timeout.
    TimedOut,
}

impl Slot {
    pub(crate) fn new(
        home: Home,
        node: String,
        factory: Factory,
        persistence: PersistencePolicy,
        connect_timeout: Duration,
    ) -> Self {
        Slot(Arc::new(Shared {
            home,
            node,
            factory,
            persistence,
            connect_timeout,
            state: Mutex::new(State::default()),
            timed_out: AtomicBool::new(false),
            changed: Notify::new(),
        }))
    }

    /// The connection that is up, without waiting. Otherwise starts a
    /// connection attempt in the background (unless one is under way or
    /// the pause after a failed one lasts) and says why the node cannot take
    /// a request now.
    pub(crate) fn live(&self) -> Result<Live, NodeOutcome> {
        let (live, _) = self.0.look();
        live.map_err(|_| NodeOutcome::Failed(self.0.not_connected()))
    }

    /// The connection that is up, or the one an attempt opens by
    /// `deadline`: waits for the attempt under way, or starts one (after
    /// the short pause that follows a failed one). Fails as soon as an
    /// attempt it waited for failed, unless `retry`: then it keeps waiting
    /// for later attempts until `deadline`.
    pub(crate) async fn live_by(&self, deadline: Instant, retry: bool) -> Result<Live, NodeOutcome> {
        let mut waited_for = None;
        loop {
            // Registered before looking, so an attempt ending in between is not missed.
            let changed = self.0.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let (live, view) = self.0.look();
            if let Ok(live) = live {
                return Ok(live);
            }
            let now = Instant::now();
            let gave_up = !retry && waited_for.is_some_and(|n| n < view.attempts_ended);
            if gave_up || now >= deadline {
                return Err(match view.connecting {
                    true if now >= deadline => NodeOutcome::TimedOut,
                    _ => NodeOutcome::Failed(self.0.not_connected()),
                });
            }
            if view.connecting {
                waited_for.get_or_insert(view.attempts_ended);
            }
            // Wake when an attempt ends, or for the next one after a pause.
            let wake = view.pause_until.map_or(deadline, |t| t.min(deadline));
            tokio::select! {
                () = &mut changed => {}
                () = tokio::time::sleep_until(wake.max(now).into()) => {}
            }
        }
    }
}

/// What [`Shared::look`] saw when no connection was up.
#[derive(Default)]
struct View {
    connecting: bool,
    pause_until: Option<Instant>,
    /// Attempts ended so far: a waiter knows its attempt ended when this grows.
    attempts_ended: u64,
}

impl Live {
    /// Records what became of a request on this connection: a reply resets
    /// the stall count, a break replaces the connection at once, and
    /// [`STALL_LIMIT`] timeouts in a row replace it too.
    pub(crate) fn settle(&self, sent: Sent<'_>) {
        let shared = &self.slot;
        let answered = match sent {
            Sent::Answered => true,
            Sent::Failed(err) => !err.is_broken(),
            Sent::TimedOut => false,
        };
        // The common case, an answer with no timeout to forget, takes no lock.
        if answered && !shared.timed_out.load(Ordering::Relaxed) {
            return;
        }
        let mut state = shared.state();
        if state.generation != self.generation || state.live.is_none() {
            return; // already replaced
        }
        let why = match sent {
            _ if answered => {
                state.timeouts_in_a_row = 0;
                shared.timed_out.store(false, Ordering::Relaxed);
                return;
            }
            Sent::Failed(err) => err.classify(),
            Sent::Answered => unreachable!("answered above"),
            Sent::TimedOut => {
                state.timeouts_in_a_row += 1;
                shared.timed_out.store(true, Ordering::Relaxed);
                if state.timeouts_in_a_row < STALL_LIMIT {
                    return;
                }
                tracing::warn!(node = %shared.node, timeouts = STALL_LIMIT, "connection stopped answering; replacing it");
                NodeFailure {
                    kind: ErrorKind::Unavailable,
                    detail: format!(
                        "the connection stopped answering ({STALL_LIMIT} requests timed out in a row)"
                    ),
                }
            }
        };
        tracing::debug!(node = %shared.node, error = %why.detail, "connection dropped; reconnecting in the background");
        let old = state.live.take();
        state.timeouts_in_a_row = 0;
        state.down = Some(why);
        drop(state);
        drop(old);
        shared.reconnect();
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The connection that is up, or (starting an attempt if it may) what
    /// the slot is doing instead.
    fn look(self: &Arc<Self>) -> (Result<Live, ()>, View) {
        let mut state = self.state();
        if let Some(connection) = &state.live {
            let live = Live {
                connection: connection.clone(),
                generation: state.generation,
                slot: self.clone(),
            };
            return (Ok(live), View::default());
        }
        let paused = state.pause_until.is_some_and(|t| Instant::now() < t);
        let start = !state.connecting && !paused;
        if start {
            state.connecting = true;
        }
        let view = View {
            connecting: state.connecting,
            pause_until: state.pause_until,
            attempts_ended: state.attempts_ended,
        };
        drop(state);
        if start {
            self.start_attempt();
        }
        (Err(()), view)
    }

    /// A new connection that passed the persistence check.
    async fn open(&self, ended: EndNotice) -> Result<Connection, NodeFailure> {
        let (connection, persistence) = self
            .factory
            .clone()
            .connect(ended)
            .await
            .map_err(|e| e.classify())?;
        self.persistence.judge(&self.node, &persistence)?;
        Ok(connection)
    }

    /// The connection `generation` ended; reconnects at once if `reopen`
    /// (not when its runtime is shutting down).
    fn connection_ended(self: &Arc<Self>, generation: u32, reopen: bool) {
        let mut state = self.state();
        if state.generation != generation || state.live.is_none() {
            return;
        }
        tracing::debug!(node = %self.node, "connection closed; reconnecting in the background");
        let old = state.live.take();
        state.timeouts_in_a_row = 0;
        state.down = reopen.then(|| NodeFailure {
            kind: ErrorKind::Unavailable,
            detail: "the connection closed".to_owned(),
        });
        drop(state);
        drop(old);
        if reopen {
            self.reconnect();
        }
    }

    /// The failure a request gets while this slot has no connection.
    fn not_connected(&self) -> NodeFailure {
        match &self.state().down {
            Some(failure) => NodeFailure {
                kind: failure.kind,
                detail: format!(
                    "not connected ({}); reconnecting in the background",
                    failure.detail
                ),
            },
            None => NodeFailure {
                kind: ErrorKind::Unavailable,
                detail: "not connected yet; connecting in the background".to_owned(),
            },
        }
    }

    /// Starts one background connection attempt unless one may not start
    /// (a connection is up, an attempt is under way, or the pause after a
    /// failed one lasts).
    fn reconnect(self: &Arc<Self>) {
        {
            let mut state = self.state();
            let paused = state.pause_until.is_some_and(|t| Instant::now() < t);
            if state.live.is_some() || state.connecting || paused {
                return;
            }
            state.connecting = true;
        }
        self.start_attempt();
    }

    /// Spawns the attempt `connecting` was just set for.
    fn start_attempt(self: &Arc<Self>) {
        let attempt = Attempt(self.clone()).run();
        let spawned = match tokio::runtime::Handle::try_current() {
            Ok(caller) if self.home == Home::Caller => {
                caller.spawn(attempt);
                Ok(())
            }
            _ => crate::runtime::handle().map(|internal| drop(internal.spawn(attempt))),
        };
        if let Err(err) = spawned {
            let mut state = self.state();
            state.connecting = false;
            state.attempts_ended += 1;
            state.down = Some(NodeFailure {
                kind: ErrorKind::Closed,
                detail: err.message().to_owned(),
            });
        }
    }
}

/// One background connection attempt. If its runtime drops it unfinished
/// (a caller's runtime shutting down), the slot is free for the next one.
struct Attempt(Arc<Shared>);

impl Attempt {
    async fn run(self) {
        let shared = &self.0;
        let ended = EndNotice::default();
        let outcome = within(shared.connect_timeout, shared.open(ended.clone())).await;
        let mut state = shared.state();
        match outcome {
            Ok(Ok(connection)) => {
                tracing::debug!(node = %shared.node, "connected");
                state.live = Some(connection);
                state.generation = state.generation.wrapping_add(1);
                state.timeouts_in_a_row = 0;
                state.down = None;
                state.pause_until = None;
                let _ = ended.0.set((Arc::downgrade(shared), state.generation));
            }
            Ok(Err(failure)) => {
                tracing::debug!(node = %shared.node, error = %failure.detail, "connection attempt failed");
                state.down = Some(failure);
                state.pause_until = Some(Instant::now() + RECONNECT_PAUSE);
            }
            Err(Elapsed) => {
                state.down = Some(NodeFailure {
                    kind: ErrorKind::Unavailable,
                    detail: format!(
                        "connecting took longer than the connect timeout ({:?})",
                        shared.connect_timeout
                    ),
                });
                state.pause_until = Some(Instant::now() + RECONNECT_PAUSE);
            }
        }
        state.connecting = false;
        state.attempts_ended += 1;
        drop(state);
        shared.changed.notify_waiters();
    }
}

/// Drives a connection and tells its slot when it ends: the node closed it
/// (restart, idle timeout, a reset), or its runtime shut down. Either way
/// nothing sent on it from then on could reach the node.
pub(crate) async fn watched(driver: Driver, notice: EndNotice) {
    struct Ended {
        notice: EndNotice,
        /// False while the driver runs: dropped then, its runtime is going away.
        finished: bool,
    }
    impl Drop for Ended {
        fn drop(&mut self) {
            if let Some((slot, generation)) = self.notice.0.get()
                && let Some(slot) = slot.upgrade()
            {
                slot.connection_ended(*generation, self.finished);
            }
        }
    }
    let mut ended = Ended {
        notice,
        finished: false,
    };
    driver.await;
    ended.finished = true;
}

impl Drop for Attempt {
    fn drop(&mut self) {
        let mut state = self.0.state();
        if state.connecting {
            // Dropped before it ended (its runtime is shutting down).
            state.connecting = false;
            state.attempts_ended += 1;
            drop(state);
            self.0.changed.notify_waiters();
        }
    }
}

/// Error replies may arrive as values; treat them as errors in one place.
pub(crate) fn server_error_as_err(result: RedisResult<Value>) -> RedisResult<Value> {
    match result {
        Ok(Value::ServerError(err)) => Err(err.into()),
        other => other,
    }
}

/// An empty pipeline that returns each command's error in place instead of
/// failing as a whole, as `Node::eval_pipeline` expects.
pub(crate) fn pipeline() -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe
}

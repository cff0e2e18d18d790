//! A TCP fault proxy between one client and one Redis node.
//!
//! `tc netem` does not exist on the test machines, so faults on the wire are
//! made in user space: a test puts one [`FaultProxy`] in front of every node
//! *for every client* (so partitions can be asymmetric) and switches its
//! [`Mode`] while the client runs.
//!
//! The proxy runs on a runtime thread of its own, so synchronous tests and
//! tests on any tokio runtime can use it alike.
//!
//! ## What the modes do to open connections
//!
//! A byte stream cannot lose bytes in the middle and carry on: TCP either
//! delivers everything in order or the connection breaks. A Redis client
//! that matched a later reply to an earlier request would be a fault no real
//! network produces. So a connection that lost bytes (in [`Mode::Blackhole`]
//! or [`Mode::DropReplies`]) is **closed with a reset** as soon as it would
//! have to carry data again, or as soon as the proxy goes back to a
//! forwarding mode. The client sees a dead connection and reconnects, as it
//! would after a real partition.
//!
//! ```no_run
//! use std::time::Duration;
//! use fencelock_harness::{FaultProxy, Mode, RedisNode};
//!
//! let node = RedisNode::start(&Default::default());
//! let proxy = FaultProxy::start(node.port());
//! // a client connects to proxy.url() instead of node.url() ...
//! proxy.set(Mode::Delay { each_way: Duration::from_millis(20), jitter: Duration::ZERO });
//! proxy.set(Mode::DropReplies); // requests reach Redis, replies are lost
//! proxy.set(Mode::Pass);
//! ```

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What a proxy does with the traffic between client and node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything at once.
    Pass,
    /// Forward everything, each chunk delayed by `each_way` plus a uniform
    /// random part of up to `jitter`, in both directions. Order is kept.
    Delay {
        /// The fixed delay in each direction.
        each_way: Duration,
        /// The largest random extra delay per chunk.
        jitter: Duration,
    },
    /// Accept connections but forward nothing and answer nothing: a silent
    /// partition. Connections that lost bytes are reset when it ends.
    Blackhole,
    /// Deliver requests to the node but throw its replies away: the
    /// ambiguous acquire, where the client times out but the node applied it.
    DropReplies,
    /// Reset every open connection now, and every new one at once: a
    /// refused, reset or killed connection.
    Reset,
    /// The connections open when this mode is set go silent for good: what
    /// either side sends vanishes and they are never reset, not even after
    /// a later [`Mode::Pass`]. New connections are forwarded. A middlebox
    /// (NAT, firewall) that forgot the flows: only a client that gives up on
    /// a stalled connection and opens a new one gets through.
    StallOpen,
    /// Forward everything, but reset a connection, at once and without
    /// forwarding it, when a request chunk contains this text: a link that
    /// breaks just as one particular command (say, a script's SHA1) is sent.
    /// The text is looked for within each chunk read, so keep it short: a
    /// client writes one small command in one piece.
    ResetOnRequest(&'static str),
}

/// What a proxy did so far, for asserting that a fault really happened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Client connections accepted.
    pub accepted: u64,
    /// Request bytes thrown away.
    pub requests_dropped: u64,
    /// Reply bytes thrown away.
    pub replies_dropped: u64,
    /// Connections closed by the proxy with a reset.
    pub resets: u64,
    /// Connections silenced for good by [`Mode::StallOpen`].
    pub stalled: u64,
}

/// One proxy: a loopback port that forwards to one upstream node.
/// Dropping it closes its port and every connection through it.
pub struct FaultProxy {
    port: u16,
    upstream: u16,
    control: watch::Sender<Control>,
    counters: Arc<Counters>,
}

/// The proxy's current instruction; `Stop` only when it is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Control {
    Run(Mode),
    Stop,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    requests_dropped: AtomicU64,
    replies_dropped: AtomicU64,
    resets: AtomicU64,
    stalled: AtomicU64,
    /// Connections numbered below this go silent ([`Mode::StallOpen`]).
    stall_below: AtomicU64,
}

/// The runtime every proxy runs on: one worker thread, started on first use
/// and kept for the life of the process (tests come and go; it is tiny).
fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fault-proxy")
            .enable_all()
            .build()
            .expect("start the fault proxy's runtime")
    })
}

impl FaultProxy {
    /// Starts a proxy in [`Mode::Pass`] on a free loopback port, forwarding to
    /// `127.0.0.1:upstream_port`.
    pub fn start(upstream_port: u16) -> FaultProxy {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .expect("bind a loopback port for the fault proxy");
        let port = listener.local_addr().expect("proxy address").port();
        listener
            .set_nonblocking(true)
            .expect("non-blocking proxy listener");
        let (control, control_rx) = watch::channel(Control::Run(Mode::Pass));
        let counters = Arc::new(Counters::default());
        let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, upstream_port));
        let task_counters = counters.clone();
        runtime().spawn(async move {
            let listener = TcpListener::from_std(listener).expect("register the proxy listener");
            accept_loop(listener, upstream, control_rx, task_counters).await;
        });
        FaultProxy {
            port,
            upstream: upstream_port,
            control,
            counters,
        }
    }

    /// One proxy per node, all in [`Mode::Pass`]: the view of one client.
    pub fn for_ports(upstream_ports: impl IntoIterator<Item = u16>) -> Vec<FaultProxy> {
        upstream_ports.into_iter().map(FaultProxy::start).collect()
    }

    /// The proxy's own loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The node port it forwards to.
    pub fn upstream_port(&self) -> u16 {
        self.upstream
    }

    /// `redis://127.0.0.1:PORT` of the proxy: give it to the client instead of the node's.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Switches the mode; open connections follow at once.
    pub fn set(&self, mode: Mode) {
        if mode == Mode::StallOpen {
            // Every connection accepted so far is numbered below the count.
            let accepted = self.counters.accepted.load(Ordering::SeqCst);
            self.counters.stall_below.fetch_max(accepted, Ordering::SeqCst);
        }
        self.control.send_replace(Control::Run(mode));
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        match *self.control.borrow() {
            Control::Run(mode) => mode,
            Control::Stop => Mode::Reset,
        }
    }

    /// What the proxy did so far.
    pub fn stats(&self) -> ProxyStats {
        let c = &self.counters;
        ProxyStats {
            accepted: c.accepted.load(Ordering::Relaxed),
            requests_dropped: c.requests_dropped.load(Ordering::Relaxed),
            replies_dropped: c.replies_dropped.load(Ordering::Relaxed),
            resets: c.resets.load(Ordering::Relaxed),
            stalled: c.stalled.load(Ordering::Relaxed),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.control.send_replace(Control::Stop);
    }
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("port", &self.port)
            .field("upstream", &self.upstream)
            .field("mode", &self.mode())
            .finish()
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    mut control: watch::Receiver<Control>,
    counters: Arc<Counters>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                let number = counters.accepted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(client, number, upstream, control.clone(), counters.clone()));
            }
            changed = control.changed() => {
                if changed.is_err() || *control.borrow() == Control::Stop {
                    return;
                }
            }
        }
    }
}

/// Which way a chunk travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Request,
    Reply,
}

/// What happened to one connection's streams so far.
#[derive(Default)]
struct Losses {
    requests: AtomicBool,
    replies: AtomicBool,
    /// Silenced for good by [`Mode::StallOpen`].
    stalled: AtomicBool,
}

impl Losses {
    fn stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }

    /// Silences the connection numbered `number` if a [`Mode::StallOpen`]
    /// covers it; true if it is (or already was) silenced.
    fn stall_if_covered(&self, number: u64, counters: &Counters) -> bool {
        if self.stalled() {
            return true;
        }
        if number < counters.stall_below.load(Ordering::SeqCst) {
            self.stalled.store(true, Ordering::Relaxed);
            counters.stalled.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    fn any(&self) -> bool {
        self.requests.load(Ordering::Relaxed) || self.replies.load(Ordering::Relaxed)
    }

    fn mark(&self, direction: Direction) {
        match direction {
            Direction::Request => self.requests.store(true, Ordering::Relaxed),
            Direction::Reply => self.replies.store(true, Ordering::Relaxed),
        }
    }
}

/// The fate of one chunk.
enum Route {
    Forward(Duration),
    Discard,
    Close,
}

/// Decides a chunk's fate from the mode and the connection's past losses.
/// Forwarding on a stream that already lost bytes would desynchronise the
/// client's request/reply matching, so such a connection is closed instead;
/// the one exception is requests in `DropReplies`, which keep the node's side
/// of the stream intact (only replies go missing).
fn route(direction: Direction, control: Control, losses: &Losses, chunk: &[u8]) -> Route {
    let mode = match control {
        Control::Run(mode) => mode,
        Control::Stop => return Route::Close,
    };
    if losses.stalled() && mode != Mode::Reset {
        return Route::Discard;
    }
    match (mode, direction) {
        (Mode::Reset, _) => Route::Close,
        (Mode::Blackhole, _) | (Mode::DropReplies, Direction::Reply) => Route::Discard,
        (Mode::DropReplies, Direction::Request) if losses.requests.load(Ordering::Relaxed) => Route::Close,
        (Mode::DropReplies, Direction::Request) => Route::Forward(Duration::ZERO),
        _ if losses.any() => Route::Close,
        (Mode::ResetOnRequest(text), Direction::Request) if contains(chunk, text.as_bytes()) => Route::Close,
        (Mode::Pass | Mode::StallOpen | Mode::ResetOnRequest(_), _) => Route::Forward(Duration::ZERO),
        (Mode::Delay { each_way, jitter }, _) => Route::Forward(each_way + random_up_to(jitter)),
    }
}

fn contains(chunk: &[u8], text: &[u8]) -> bool {
    !text.is_empty() && chunk.windows(text.len()).any(|window| window == text)
}

fn random_up_to(limit: Duration) -> Duration {
    if limit.is_zero() {
        return Duration::ZERO;
    }
    let micros = u64::try_from(limit.as_micros()).unwrap_or(u64::MAX);
    Duration::from_micros(rand::rng().random_range(0..=micros))
}

/// True when this connection must be closed under the new instruction
/// (reset, stop, or back to forwarding after it lost bytes).
fn must_close(control: Control, losses: &Losses) -> bool {
    match control {
        Control::Stop | Control::Run(Mode::Reset) => true,
        _ if losses.stalled() => false,
        Control::Run(Mode::Pass | Mode::Delay { .. } | Mode::StallOpen | Mode::ResetOnRequest(_)) => {
            losses.any()
        }
        Control::Run(Mode::Blackhole | Mode::DropReplies) => false,
    }
}

/// Carries one client connection until either side closes or a fault ends it.
async fn serve(
    client: TcpStream,
    number: u64,
    upstream: SocketAddr,
    mut control: watch::Receiver<Control>,
    counters: Arc<Counters>,
) {
    // Every close by the proxy is a reset, as a broken network path would give.
    let _ = client.set_zero_linger();
    let _ = client.set_nodelay(true);
    if matches!(*control.borrow(), Control::Stop | Control::Run(Mode::Reset)) {
        counters.resets.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        counters.resets.fetch_add(1, Ordering::Relaxed);
        return; // the node is down: the client sees a reset, as from a dead host's port
    };
    let _ = server.set_nodelay(true);
    let losses = Arc::new(Losses::default());
    losses.stall_if_covered(number, &counters);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let requests = pump(
        number,
        client_read,
        server_write,
        Direction::Request,
        control.clone(),
        losses.clone(),
        counters.clone(),
    );
    let replies = pump(
        number,
        server_read,
        client_write,
        Direction::Reply,
        control.clone(),
        losses.clone(),
        counters.clone(),
    );
    let watcher = async {
        loop {
            // The proxy going away (its control dropped) closes it too.
            let gone = control.changed().await.is_err();
            // A stall covers every connection open when it was set, even if
            // the mode changed again before this task looked.
            if !gone {
                losses.stall_if_covered(number, &counters);
            }
            if gone || must_close(*control.borrow(), &losses) {
                counters.resets.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    };
    // Whichever ends first closes the connection (both halves go with the
    // other futures). A close by fault was counted before that, so a client
    // that sees the reset finds it in the stats.
    tokio::select! {
        () = requests => {}
        () = replies => {}
        () = watcher => {}
    }
}

/// Copies one direction, chunk by chunk, as [`route`] decides, until either
/// side closes or a fault ends it (counted in `resets` before it returns).
async fn pump(
    number: u64,
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    direction: Direction,
    control: watch::Receiver<Control>,
    losses: Arc<Losses>,
    counters: Arc<Counters>,
) {
    // A queue between reader and writer lets delayed chunks overlap in time
    // (a delay, not a bandwidth limit) while keeping their order.
    let (queue, mut queued) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        let mut last_due = Instant::now();
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => n,
            };
            let instruction = *control.borrow();
            losses.stall_if_covered(number, &counters);
            match route(direction, instruction, &losses, &buf[..n]) {
                Route::Forward(delay) => {
                    last_due = last_due.max(Instant::now() + delay);
                    if queue.send((last_due, buf[..n].to_vec())).is_err() {
                        return false;
                    }
                }
                Route::Discard => {
                    losses.mark(direction);
                    let dropped = match direction {
                        Direction::Request => &counters.requests_dropped,
                        Direction::Reply => &counters.replies_dropped,
                    };
                    dropped.fetch_add(n as u64, Ordering::Relaxed);
                }
                Route::Close => {
                    counters.resets.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = queued.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::pin!(reader, writer);
    tokio::select! {
        fault = &mut reader => {
            if !fault {
                // A clean close: deliver what is still queued first.
                writer.await;
            }
        }
        () = &mut writer => {}
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream as StdStream;
    use std::time::Instant as StdInstant;

    use super::*;
    use crate::RedisNode;

    fn connect(proxy: &FaultProxy) -> StdStream {
        let stream = StdStream::connect((Ipv4Addr::LOCALHOST, proxy.port())).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        stream
    }

    /// Sends a RESP command and reads one short reply; `None` on timeout, `Err` on a broken connection.
    fn ask(stream: &mut StdStream, command: &str) -> std::io::Result<Option<String>> {
        stream.write_all(command.as_bytes())?;
        let mut buf = [0u8; 256];
        match stream.read(&mut buf) {
            Ok(0) => Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => Ok(Some(String::from_utf8_lossy(&buf[..n]).into_owned())),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn get(node: &RedisNode, key: &str) -> Option<String> {
        match node.command(&["GET", key]) {
            redis::Value::BulkString(bytes) => Some(String::from_utf8(bytes).unwrap()),
            _ => None,
        }
    }

    #[test]
    fn pass_forwards_both_ways() {
        let node = RedisNode::start(&Default::default());
        let proxy = FaultProxy::start(node.port());
        let mut stream = connect(&proxy);
        assert_eq!(
            ask(&mut stream, "PING\r\n").unwrap().as_deref(),
            Some("+PONG\r\n")
        );
        assert_eq!(proxy.stats().accepted, 1);
    }

    #[test]
    fn delay_applies_each_way() {
        let node = RedisNode::start(&Default::default());
        let proxy = FaultProxy::start(node.port());
        proxy.set(Mode::Delay {
            each_way: Duration::from_millis(40),
            jitter: Duration::from_millis(10),
        });
        let mut stream = connect(&proxy);
        let started = StdInstant::now();
        assert_eq!(
            ask(&mut stream, "PING\r\n").unwrap().as_deref(),
            Some("+PONG\r\n")
        );
        let round_trip = started.elapsed();
        assert!(
            round_trip >= Duration::from_millis(80) && round_trip < Duration::from_millis(250),
            "round trip {round_trip:?} with 40 ms each way"
        );
    }

    #[test]
    fn reset_on_request_breaks_only_the_matching_request() {
        let node = RedisNode::start(&Default::default());
        let proxy = FaultProxy::start(node.port());
        proxy.set(Mode::ResetOnRequest("doomed"));
        let mut stream = connect(&proxy);
        assert_eq!(
            ask(&mut stream, "SET kept 1\r\n").unwrap().as_deref(),
            Some("+OK\r\n")
        );
        assert!(
            ask(&mut stream, "SET doomed 1\r\n").is_err(),
            "the matching request went through"
        );
        assert_eq!(
            get(&node, "doomed"),
            None,
            "the matching request reached the node"
        );
        assert_eq!(proxy.stats().resets, 1);
        let mut fresh = connect(&proxy);
        assert_eq!(
            ask(&mut fresh, "GET kept\r\n").unwrap().as_deref(),
            Some("$1\r\n1\r\n")
        );
    }

    #[test]
    fn blackhole_answers_nothing_and_resets_on_heal() {
        let node = RedisNode::start(&Default::default());
        let proxy = FaultProxy::start(node.port());
        let mut stream = connect(&proxy);
        assert!(ask(&mut stream, "PING\r\n").unwrap().is_some());
        proxy.set(Mode::Blackhole);
        assert_eq!(
            ask(&mut stream, "SET bh 1\r\n").unwrap(),
            None,
            "answered in a blackhole"
        );
        assert_eq!(get(&node, "bh"), None, "a blackholed request reached the node");
        let mut fresh = connect(&proxy);
        assert_eq!(
            ask(&mut fresh, "PING\r\n").unwrap(),
            None,
            "new connections are blackholed too"
        );
        proxy.set(Mode::Pass);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            ask(&mut stream, "PING\r\n").is_err(),
            "a connection that lost bytes must not resume"
        );
        let mut healed = connect(&proxy);
        assert_eq!(
            ask(&mut healed, "PING\r\n").unwrap().as_deref(),
            Some("+PONG\r\n")
        );
        assert!(proxy.stats().requests_dropped > 0);
    }

    #[test]
    fn drop_replies_applies_the_request_and_loses_the_answer() {
        let node = RedisNode::start(&Default::default());
        let proxy = FaultProxy::start(node.port());
        let mut stream = connect(&proxy);
        proxy.set(Mode::DropReplies);
        assert_eq!(ask(&mut stream, "SET ambiguous yes\r\n").unwrap(), None);
        assert_eq!(
            get(&node, "ambiguous").as_deref(),
            Some("yes"),
            "the request was not applied"
        );
        assert!(proxy.stats().replies_dropped > 0);
        proxy.set(Mode::Pass);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            ask(&mut stream, "PING\r\n").is_err(),
            "a connection that lost replies must not resume"
        );
    }

    #[test]
    fn reset_closes_open_and_new_connections() {
        let node = RedisNode::start(&Default::default());
        let proxy = FaultProxy::start(node.port());
        let mut stream = connect(&proxy);
        assert!(ask(&mut stream, "PING\r\n").unwrap().is_some());
        proxy.set(Mode::Reset);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            ask(&mut stream, "PING\r\n").is_err(),
            "open connection survived a reset"
        );
        let mut fresh = connect(&proxy);
        let started = StdInstant::now();
        assert!(
            ask(&mut fresh, "PING\r\n").is_err(),
            "new connection accepted in reset mode"
        );
        assert!(
            started.elapsed() < Duration::from_millis(200),
            "a reset must be fast"
        );
        proxy.set(Mode::Pass);
        let mut healed = connect(&proxy);
        assert!(ask(&mut healed, "PING\r\n").unwrap().is_some());
        assert!(proxy.stats().resets >= 2);
    }

    #[test]
    fn a_dead_node_looks_like_a_reset() {
        let node = RedisNode::start(&Default::default());
        let proxy = FaultProxy::start(node.port());
        node.kill();
        // The proxy resets the client as soon as the upstream connect fails,
        // which on a busy machine can already reach `connect()` itself.
        let outcome = StdStream::connect((Ipv4Addr::LOCALHOST, proxy.port())).and_then(|mut stream| {
            stream.set_read_timeout(Some(Duration::from_millis(300)))?;
            ask(&mut stream, "PING\r\n")
        });
        assert!(outcome.is_err(), "expected a broken connection, got {outcome:?}");
    }

    #[test]
    fn stall_open_silences_open_connections_for_good_and_passes_new_ones() {
        let node = RedisNode::start(&Default::default());
        let proxy = FaultProxy::start(node.port());
        let mut open = connect(&proxy);
        assert!(ask(&mut open, "PING\r\n").unwrap().is_some());
        proxy.set(Mode::StallOpen);
        assert_eq!(
            ask(&mut open, "SET stalled 1\r\n").unwrap(),
            None,
            "a stalled connection answered"
        );
        assert_eq!(get(&node, "stalled"), None, "a stalled request reached the node");
        let mut fresh = connect(&proxy);
        assert_eq!(
            ask(&mut fresh, "PING\r\n").unwrap().as_deref(),
            Some("+PONG\r\n"),
            "a new connection must pass"
        );
        proxy.set(Mode::Pass);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            ask(&mut open, "PING\r\n").unwrap(),
            None,
            "a stalled connection must stay silent (no reply, no reset) after the heal"
        );
        assert_eq!(proxy.stats().stalled, 1);
        assert_eq!(proxy.stats().resets, 0);
    }

    #[test]
    fn dropping_the_proxy_closes_its_connections() {
        let node = RedisNode::start(&Default::default());
        let proxy = FaultProxy::start(node.port());
        let mut stream = connect(&proxy);
        assert!(ask(&mut stream, "PING\r\n").unwrap().is_some());
        drop(proxy);
        std::thread::sleep(Duration::from_millis(50));
        assert!(ask(&mut stream, "PING\r\n").is_err());
    }
}

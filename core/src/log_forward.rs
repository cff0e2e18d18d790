//! The core's events for a front's own logger: Python's `logging`, a Node
//! diagnostics channel, a .NET `TraceSource`, a C callback.
//!
//! The core speaks `tracing`; a Rust application installs whatever
//! subscriber it likes and sees the events there. A front over another
//! language has no subscriber, so it calls [`forward_logs`], which installs
//! one for the process (for the library that links this crate) and hands
//! each event at or above the chosen level to the front's sink as a
//! [`LogRecord`].
//!
//! The thread that emits an event never waits for the sink: records go
//! through a bounded queue to one delivery thread, which calls the sink in
//! order. A sink slower than the events loses the overflow and is told how
//! many records it lost. Records carry what the events carry: node URLs
//! without credentials, resources, fencing tokens (which are not secrets),
//! never a lock's random token or a password.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwap;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

use crate::error::{Error, Result};
use crate::runtime;

/// Records waiting for the delivery thread; beyond this they are dropped
/// (and counted) rather than slow down a lock operation.
const QUEUE_CAPACITY: usize = 1024;

/// The `tracing` target of every core event starts with this.
const CORE_TARGET: &str = "fencelock";

/// How much an event matters, most severe first. The numbers and names are
/// the shared table `log_levels` in `tests/vectors/protocol.json`; every
/// front maps them onto its logger's own levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum LogLevel {
    /// Something failed that the caller must know about.
    Error = 1,
    /// A lock was lost, a renewal failed, a node was unreachable.
    Warn = 2,
    /// Rare, notable events.
    Info = 3,
    /// Each acquisition, release, extension and connection change.
    Debug = 4,
    /// Each renewal.
    Trace = 5,
}

impl LogLevel {
    /// Every level, most severe first.
    pub const ALL: [LogLevel; 5] = [
        LogLevel::Error,
        LogLevel::Warn,
        LogLevel::Info,
        LogLevel::Debug,
        LogLevel::Trace,
    ];

    /// The stable number: 1 (error) to 5 (trace).
    pub fn number(self) -> u8 {
        self as u8
    }

    /// The level with this number, if any.
    pub fn from_number(number: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|level| level.number() == number)
    }

    /// The stable lowercase name: `error`, `warn`, `info`, `debug`, `trace`.
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }

    /// The level with this name (as [`LogLevel::name`] spells it), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|level| level.name() == name)
    }

    fn of(level: &tracing::Level) -> Self {
        match *level {
            tracing::Level::ERROR => LogLevel::Error,
            tracing::Level::WARN => LogLevel::Warn,
            tracing::Level::INFO => LogLevel::Info,
            tracing::Level::DEBUG => LogLevel::Debug,
            tracing::Level::TRACE => LogLevel::Trace,
        }
    }

    fn filter(level: Option<Self>) -> LevelFilter {
        match level {
            None => LevelFilter::OFF,
            Some(LogLevel::Error) => LevelFilter::ERROR,
            Some(LogLevel::Warn) => LevelFilter::WARN,
            Some(LogLevel::Info) => LevelFilter::INFO,
            Some(LogLevel::Debug) => LevelFilter::DEBUG,
            Some(LogLevel::Trace) => LevelFilter::TRACE,
        }
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One core event, as a front's logger receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogRecord {
    /// How much it matters.
    pub level: LogLevel,
    /// The module that emitted it, such as `fencelock::lock_state`.
    pub target: String,
    /// What happened, such as `lock lost`.
    pub message: String,
    /// What it happened to, in the order the event names them, such as
    /// `("resource", "jobs")`, `("reason", "expired")`.
    pub fields: Vec<(String, String)>,
}

impl LogRecord {
    /// The message followed by its fields: `lock lost resource=jobs reason=expired`.
    pub fn line(&self) -> String {
        let mut line = self.message.clone();
        for (name, value) in &self.fields {
            let _ = write!(line, " {name}={value}");
        }
        line
    }

    fn dropped(count: u64) -> Self {
        LogRecord {
            level: LogLevel::Warn,
            target: CORE_TARGET.to_owned(),
            message: "log records dropped: the logger did not keep up".to_owned(),
            fields: vec![("dropped".to_owned(), count.to_string())],
        }
    }
}

/// Where a front's records go, called on fencelock's delivery thread, one
/// record at a time.
pub type LogSink = Box<dyn FnMut(LogRecord) + Send>;

/// Sends the core's events at `level` and above to `sink` from now on, in
/// place of any earlier sink; `None` forwards nothing (as does
/// [`stop_forwarding_logs`]).
///
/// The first call installs fencelock's `tracing` subscriber as the global
/// default of this process (of the library that links fencelock). It fails
/// with `invalid_argument` when another subscriber is already installed:
/// the events then go to that one.
///
/// The sink runs on a thread of its own, never on the caller's or on a
/// lock operation's, so it may take whatever lock or interpreter state it
/// needs; records a slow sink cannot take are dropped, and the next record
/// it gets says how many. Neither this nor the other calls here wait for
/// the sink.
pub fn forward_logs(level: Option<LogLevel>, sink: LogSink) -> Result<()> {
    forwarder()?.delivery.replace_sink(Some(sink));
    set_log_level(level);
    Ok(())
}

/// Changes the level records are forwarded at (`None`: none), keeping the sink.
pub fn set_log_level(level: Option<LogLevel>) {
    if let Some(forwarder) = FORWARDER.get() {
        forwarder
            .level
            .store(level.map_or(0, LogLevel::number), Ordering::Relaxed);
        // Callsites cache whether they are enabled: ask them again.
        tracing::callsite::rebuild_interest_cache();
    }
}

/// The level records are forwarded at now, `None` when none are.
pub fn log_level() -> Option<LogLevel> {
    FORWARDER
        .get()
        .and_then(|f| LogLevel::from_number(f.level.load(Ordering::Relaxed)))
}

/// Forwards nothing more and drops the sink before its next record.
pub fn stop_forwarding_logs() {
    set_log_level(None);
    if let Some(forwarder) = FORWARDER.get() {
        forwarder.delivery.replace_sink(None);
    }
}

static FORWARDER: OnceLock<Forwarder> = OnceLock::new();

fn forwarder() -> Result<&'static Forwarder> {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(forwarder) = FORWARDER.get() {
        return Ok(forwarder);
    }
    let forwarder = Forwarder::new()?;
    tracing::subscriber::set_global_default(ForwardingSubscriber).map_err(|_| {
        Error::invalid(
            "another tracing subscriber is already installed in this process; fencelock's events go to it, \
             so they cannot also be forwarded",
        )
    })?;
    let forwarder = FORWARDER.get_or_init(|| forwarder);
    tracing::callsite::rebuild_interest_cache();
    Ok(forwarder)
}

/// What the subscriber shares with the delivery thread.
struct Forwarder {
    /// The `LogLevel` number forwarded at, 0 for none.
    level: AtomicU8,
    /// The queue to this process's delivery thread. A child made by `fork()`
    /// inherits the parent's queue but not its thread: the first record in
    /// the child opens a new queue and thread (see [`Forwarder::line`]).
    line: ArcSwap<Line>,
    /// Held while a forked child replaces the line.
    respawn: Mutex<()>,
    delivery: Arc<DeliveryState>,
}

/// A queue and the process whose delivery thread empties it.
struct Line {
    pid: u32,
    queue: SyncSender<LogRecord>,
}

struct DeliveryState {
    /// A sink to use from the next record on (`Some(None)`: none). Replacing
    /// the sink never waits for a call of the one in use to return.
    replacement: Mutex<Option<Option<LogSink>>>,
    /// The sink in use, locked by the delivery thread only (one record at a
    /// time), and kept here rather than on that thread's stack so that the
    /// delivery thread of a forked child takes it over.
    current: Mutex<Option<LogSink>>,
    dropped: AtomicU64,
}

impl Forwarder {
    fn new() -> Result<Self> {
        let delivery = Arc::new(DeliveryState {
            replacement: Mutex::new(None),
            current: Mutex::new(None),
            dropped: AtomicU64::new(0),
        });
        Ok(Forwarder {
            level: AtomicU8::new(0),
            line: ArcSwap::from_pointee(Line::open(&delivery)?),
            respawn: Mutex::new(()),
            delivery,
        })
    }

    fn level(&self) -> Option<LogLevel> {
        LogLevel::from_number(self.level.load(Ordering::Relaxed))
    }

    fn allows(&self, metadata: &Metadata<'_>) -> bool {
        self.level()
            .is_some_and(|level| LogLevel::of(metadata.level()) <= level)
    }

    /// The queue of this process's delivery thread, opened anew in a forked child.
    fn line(&self) -> Option<Arc<Line>> {
        let line = self.line.load_full();
        if line.pid == runtime::current_pid() {
            return Some(line);
        }
        let _one_at_a_time = self.respawn.lock().unwrap_or_else(|e| e.into_inner());
        let line = self.line.load_full();
        if line.pid == runtime::current_pid() {
            return Some(line);
        }
        let fresh = Arc::new(Line::open(&self.delivery).ok()?);
        self.line.store(fresh.clone());
        Some(fresh)
    }

    fn enqueue(&self, record: LogRecord) {
        let Some(line) = self.line() else { return };
        match line.queue.try_send(record) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.delivery.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

impl Line {
    /// A new queue, and the thread that delivers its records.
    fn open(delivery: &Arc<DeliveryState>) -> Result<Line> {
        let (queue, receiver) = mpsc::sync_channel(QUEUE_CAPACITY);
        let delivery = delivery.clone();
        std::thread::Builder::new()
            .name("fencelock-log".to_owned())
            .spawn(move || delivery.run(receiver))
            .map_err(|e| Error::invalid(format!("could not start the log delivery thread: {e}")))?;
        Ok(Line {
            pid: runtime::current_pid(),
            queue,
        })
    }
}

impl DeliveryState {
    fn replace_sink(&self, sink: Option<LogSink>) {
        *self.replacement.lock().unwrap_or_else(|e| e.into_inner()) = Some(sink);
    }

    fn run(&self, receiver: Receiver<LogRecord>) {
        for record in receiver {
            // A fork in the middle of a call leaves this locked in the child
            // for good: that child's records then wait, and are dropped.
            let mut sink = self.current.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(replacement) = self.replacement.lock().unwrap_or_else(|e| e.into_inner()).take() {
                *sink = replacement;
            }
            let Some(sink) = sink.as_mut() else { continue };
            let dropped = self.dropped.swap(0, Ordering::Relaxed);
            if dropped > 0 {
                sink(LogRecord::dropped(dropped));
            }
            sink(record);
        }
    }
}

fn from_core(metadata: &Metadata<'_>) -> bool {
    metadata.target().starts_with(CORE_TARGET)
}

/// Forwards the core's events and nothing else: spans are never enabled
/// (the events carry what they are about), nor are other crates' events.
struct ForwardingSubscriber;

impl ForwardingSubscriber {
    fn forwarder() -> Option<&'static Forwarder> {
        FORWARDER.get()
    }
}

impl Subscriber for ForwardingSubscriber {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if !metadata.is_event() || !from_core(metadata) {
            return Interest::never();
        }
        match Self::forwarder() {
            Some(forwarder) if forwarder.allows(metadata) => Interest::always(),
            _ => Interest::never(),
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event() && from_core(metadata) && Self::forwarder().is_some_and(|f| f.allows(metadata))
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LogLevel::filter(Self::forwarder().and_then(Forwarder::level)))
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        // Never called: no span is enabled. An id must still be returned.
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let Some(forwarder) = Self::forwarder() else {
            return;
        };
        let metadata = event.metadata();
        let mut fields = FieldsToText::default();
        event.record(&mut fields);
        forwarder.enqueue(LogRecord {
            level: LogLevel::of(metadata.level()),
            target: metadata.target().to_owned(),
            message: fields.message,
            fields: fields.fields,
        });
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// An event's fields as text: `message` apart, the rest in order.
#[derive(Default)]
struct FieldsToText {
    message: String,
    fields: Vec<(String, String)>,
}

impl FieldsToText {
    fn push(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.fields.push((field.name().to_owned(), value));
        }
    }
}

impl Visit for FieldsToText {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, format!("{value:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_round_trip_through_their_numbers_and_names() {
        for level in LogLevel::ALL {
            assert_eq!(LogLevel::from_number(level.number()), Some(level));
            assert_eq!(LogLevel::from_name(level.name()), Some(level));
        }
        assert_eq!(LogLevel::from_number(0), None);
        assert_eq!(LogLevel::from_number(6), None);
        assert_eq!(LogLevel::from_name("warning"), None);
        assert!(LogLevel::Error < LogLevel::Trace, "most severe first");
    }

    #[test]
    fn a_line_is_the_message_then_the_fields() {
        let record = LogRecord {
            level: LogLevel::Warn,
            target: "fencelock::lock_state".to_owned(),
            message: "lock lost".to_owned(),
            fields: vec![
                ("resource".to_owned(), "jobs".to_owned()),
                ("reason".to_owned(), "expired".to_owned()),
            ],
        };
        assert_eq!(record.line(), "lock lost resource=jobs reason=expired");
    }
}

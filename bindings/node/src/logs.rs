//! The core's events for JavaScript (issue 21): each Node environment (the
//! main thread, each worker) that loads the package hands [`forward_logs`] a
//! callback, which `lib/log.js` publishes on the `fencelock:log` diagnostics
//! channel and prints through `util.debuglog('fencelock')`.
//!
//! The core has one sink per process, called on its own log delivery thread;
//! here it hands each record to every environment whose level admits it,
//! through a threadsafe function that is unreferenced (it never keeps the
//! event loop alive) and called without blocking (a JavaScript thread that is
//! busy makes the delivery thread drop its records, counted and told with the
//! next one, never wait). The core forwards at the most verbose level any
//! environment asks for; an environment is forgotten when it is torn down.

use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use fencelock::{LogLevel, LogRecord};
use napi::bindgen_prelude::{Function, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use napi_derive::napi;

/// Records one environment's threadsafe function holds before the next are
/// dropped (and counted).
const QUEUE_CAPACITY: usize = 1024;

/// One core event, as `lib/log.js` receives it.
#[napi(object)]
pub struct NativeLogRecord {
    /// 1 (error) to 5 (trace): the vectors' `log_levels`.
    pub level: u32,
    /// The core module that emitted it, such as `fencelock::lock_state`.
    pub target: String,
    /// What happened, such as `lock lost`.
    pub message: String,
    /// `[name, value]` pairs, in the order the event names them.
    pub fields: Vec<Vec<String>>,
    /// The message followed by ` name=value` for each field.
    pub line: String,
    /// Records this environment missed just before this one (its queue was full).
    pub dropped: u32,
}

type LogCallback = ThreadsafeFunction<
    NativeLogRecord,
    Unknown<'static>,
    NativeLogRecord,
    Status,
    false,
    true,
    QUEUE_CAPACITY,
>;

/// One environment that receives records.
struct Subscriber {
    /// Its `napi_env`, as a number: the key it is found and forgotten by.
    env: usize,
    /// The level it asked for, 0 for none.
    level: Arc<AtomicU8>,
    callback: Arc<LogCallback>,
    dropped: Arc<AtomicU32>,
}

struct Subscribers {
    list: Vec<Subscriber>,
    /// Whether the core's sink is installed (on the first `forwardLogs`).
    installed: bool,
}

static SUBSCRIBERS: Mutex<Subscribers> = Mutex::new(Subscribers {
    list: Vec::new(),
    installed: false,
});

fn subscribers() -> MutexGuard<'static, Subscribers> {
    // Plain data: a panic elsewhere cannot leave it half-written.
    SUBSCRIBERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Subscribers {
    /// The core forwards at the most verbose level any environment asks for.
    fn apply_level(&self) {
        let most = self
            .list
            .iter()
            .map(|s| s.level.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        fencelock::set_log_level(LogLevel::from_number(most));
    }

    /// Forgets the subscriber `is` picks, if any (returned, to be dropped
    /// once the lock is released).
    fn forget(&mut self, is: impl Fn(&Subscriber) -> bool) -> Option<Subscriber> {
        let at = self.list.iter().position(is)?;
        let gone = self.list.remove(at);
        self.apply_level();
        Some(gone)
    }
}

fn level_arg(level: Option<u32>) -> napi::Result<u8> {
    match level {
        None => Ok(0),
        Some(n) => u8::try_from(n)
            .ok()
            .and_then(LogLevel::from_number)
            .map(LogLevel::number)
            .ok_or_else(|| {
                napi::Error::new(
                    Status::InvalidArg,
                    format!("a log level is 1 (error) to 5 (trace) or null (nothing), not {n}"),
                )
            }),
    }
}

/// Calls `callback(record)` on this environment's JavaScript thread for each
/// core event at `level` (1 error … 5 trace; null: none) and above, in place
/// of this environment's earlier callback. Never keeps the event loop alive.
#[napi(ts_args_type = "callback: (record: NativeLogRecord) => void, level: number | null")]
pub fn forward_logs(
    env: Env,
    callback: Function<'_, NativeLogRecord, Unknown<'static>>,
    level: Option<u32>,
) -> napi::Result<()> {
    let level = level_arg(level)?;
    let callback: LogCallback = callback
        .build_threadsafe_function::<NativeLogRecord>()
        .weak::<true>()
        .max_queue_size::<QUEUE_CAPACITY>()
        .build()?;
    let key = env.raw() as usize;
    let mut subs = subscribers();
    if let Some(existing) = subs.list.iter_mut().find(|s| s.env == key) {
        existing.level.store(level, Ordering::Relaxed);
        let old = std::mem::replace(&mut existing.callback, Arc::new(callback));
        subs.apply_level();
        drop(subs);
        drop(old);
        return Ok(());
    }
    if !subs.installed {
        // The level is set below, once this environment is in the list.
        fencelock::forward_logs(None, Box::new(deliver))
            .map_err(|e| napi::Error::new(Status::GenericFailure, e.to_string()))?;
        subs.installed = true;
    }
    subs.list.push(Subscriber {
        env: key,
        level: Arc::new(AtomicU8::new(level)),
        callback: Arc::new(callback),
        dropped: Arc::new(AtomicU32::new(0)),
    });
    subs.apply_level();
    drop(subs);
    // Forgotten when the environment goes (process exit, worker terminated).
    let _hook = env.add_env_cleanup_hook(key, |key| {
        let gone = subscribers().forget(|s| s.env == key);
        drop(gone);
    })?;
    Ok(())
}

/// This environment's level from now on (1 error … 5 trace; null: none).
#[napi]
pub fn set_log_level(env: Env, level: Option<u32>) -> napi::Result<()> {
    let level = level_arg(level)?;
    let key = env.raw() as usize;
    let subs = subscribers();
    let Some(subscriber) = subs.list.iter().find(|s| s.env == key) else {
        return Err(napi::Error::new(
            Status::GenericFailure,
            "fencelock: setLogLevel before forwardLogs",
        ));
    };
    subscriber.level.store(level, Ordering::Relaxed);
    subs.apply_level();
    Ok(())
}

/// The core's sink, on its log delivery thread: the record to every
/// environment whose level admits it, never waiting.
fn deliver(record: LogRecord) {
    let line = record.line();
    let level = record.level.number();
    let targets: Vec<(Arc<LogCallback>, Arc<AtomicU32>)> = subscribers()
        .list
        .iter()
        .filter(|s| s.level.load(Ordering::Relaxed) >= level)
        .map(|s| (s.callback.clone(), s.dropped.clone()))
        .collect();
    for (callback, dropped_here) in targets {
        let dropped = dropped_here.swap(0, Ordering::Relaxed);
        let native = NativeLogRecord {
            level: u32::from(level),
            target: record.target.clone(),
            message: record.message.clone(),
            fields: record
                .fields
                .iter()
                .map(|(name, value)| vec![name.clone(), value.clone()])
                .collect(),
            line: line.clone(),
            dropped,
        };
        match callback.call(native, ThreadsafeFunctionCallMode::NonBlocking) {
            Status::Ok => {}
            Status::QueueFull => {
                dropped_here.fetch_add(dropped.saturating_add(1), Ordering::Relaxed);
            }
            // Closing: the environment is going away (its cleanup hook forgets
            // it too). Found by its callback: a new environment may have its address.
            _ => {
                let gone = subscribers().forget(|s| Arc::ptr_eq(&s.callback, &callback));
                drop(gone);
            }
        }
        // The last reference to a replaced or forgotten callback releases it here.
        drop(callback);
    }
}

//! The core's events for the JVM's platform logging (issue 21): the Kotlin
//! API (`dev.fencelock.FenceLockLog`) hands [`forward_logs`] a
//! [`NativeLogSink`], which the core's log delivery thread calls with each
//! record; the Kotlin side passes it to `System.Logger`. This module only
//! translates: which events exist, their levels and what they carry (never a
//! password or a lock's random token) are the core's.

use fencelock::{LogLevel, LogRecord};

use crate::errors::{NativeError, Result, invalid};

/// One `name=value` field of a record.
#[derive(uniffi::Record)]
pub struct NativeLogField {
    /// The field's name, such as `resource`.
    pub name: String,
    /// Its value as text.
    pub value: String,
}

/// One core event, as the Kotlin sink receives it.
#[derive(uniffi::Record)]
pub struct NativeLogRecord {
    /// 1 (error) to 5 (trace): `log_levels` in tests/vectors/protocol.json.
    pub level: u8,
    /// The core module that emitted it, such as `fencelock::lock_state`.
    pub target: String,
    /// What happened, such as `lock lost`.
    pub message: String,
    /// What it happened to, in the order the event names them.
    pub fields: Vec<NativeLogField>,
    /// The message followed by ` name=value` for each field.
    pub line: String,
}

/// Where the records go: implemented in Kotlin, called on fencelock's log
/// delivery thread, one record at a time, in order.
#[uniffi::export(callback_interface)]
pub trait NativeLogSink: Send + Sync {
    /// Takes one record. An exception the Kotlin side lets through arrives
    /// here as an error (never a panic) and costs that record only.
    fn record(&self, record: NativeLogRecord) -> Result<()>;
}

/// The core's level with number `level`, `None` for `None` (nothing).
fn level_of(level: Option<u8>) -> Result<Option<LogLevel>> {
    match level {
        None => Ok(None),
        Some(n) => LogLevel::from_number(n).map(Some).ok_or_else(|| {
            invalid(format!(
                "a log level is 1 (error) to 5 (trace) or null (nothing), not {n}"
            ))
        }),
    }
}

/// Calls `sink` with each core event at `level` (1 error … 5 trace; `None`:
/// none) and above from now on, in place of any earlier sink. Fails with
/// `invalid_argument` when the events cannot be forwarded in this process.
#[uniffi::export]
pub fn forward_logs(sink: Box<dyn NativeLogSink>, level: Option<u8>) -> Result<()> {
    let level = level_of(level)?;
    fencelock::forward_logs(level, Box::new(move |record| deliver(sink.as_ref(), record)))?;
    Ok(())
}

/// One record to the Kotlin sink, on the delivery thread. Whatever the sink
/// does, the delivery thread goes on with the next record: an error is
/// dropped, and a panic (a broken FFI contract) is caught rather than ending
/// the thread that serves every later record.
fn deliver(sink: &dyn NativeLogSink, record: LogRecord) {
    let line = record.line();
    let native = NativeLogRecord {
        level: record.level.number(),
        target: record.target,
        message: record.message,
        fields: record
            .fields
            .into_iter()
            .map(|(name, value)| NativeLogField { name, value })
            .collect(),
        line,
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink.record(native)));
}

/// Forwards at `level` (1 error … 5 trace; `None`: nothing) from now on,
/// keeping the sink.
#[uniffi::export]
pub fn set_log_level(level: Option<u8>) -> Result<()> {
    fencelock::set_log_level(level_of(level)?);
    Ok(())
}

/// The level forwarded at now (1 error … 5 trace), `None` when nothing is.
#[uniffi::export]
pub fn log_level() -> Option<u8> {
    fencelock::log_level().map(LogLevel::number)
}

/// One of the core's levels: its stable name and number.
#[derive(uniffi::Record)]
pub struct NativeLogLevel {
    /// The stable name (`"error"` … `"trace"`).
    pub name: String,
    /// The stable number (1 … 5).
    pub number: u8,
}

/// Every level of the core, most severe first (for the vectors test).
#[uniffi::export]
pub fn log_levels() -> Vec<NativeLogLevel> {
    LogLevel::ALL
        .iter()
        .map(|level| NativeLogLevel {
            name: level.name().to_owned(),
            number: level.number(),
        })
        .collect()
}

/// What the Kotlin side threw past its own handler: reported to the core's
/// delivery loop as an error, never as a panic.
impl From<uniffi::UnexpectedUniFFICallbackError> for NativeError {
    fn from(err: uniffi::UnexpectedUniFFICallbackError) -> Self {
        fencelock::Error::new(
            fencelock::ErrorKind::Internal,
            format!("the log sink failed: {}", err.reason),
        )
        .into()
    }
}

//! `fencelock_log_forward`: the core's events to a C log callback (and, through
//! it, to .NET's `TraceSource`).

use std::ffi::{c_char, c_void};

use fencelock::{LogLevel, LogRecord};

use crate::boundary::{Failure, FfiResult, boundary_status};
use crate::dispatch::UserData;
use crate::error::{c_string, fencelock_error};
use crate::status::fencelock_status;

/// How much a log record matters, most severe first
/// (`tests/vectors/protocol.json`, `log_levels`). As a threshold, a level
/// forwards the records at it and above; `FENCELOCK_LOG_OFF` forwards none.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
pub enum fencelock_log_level {
    /// As a threshold: forward nothing. No record has this level.
    FENCELOCK_LOG_OFF = 0,
    /// Something failed that the caller must know about.
    FENCELOCK_LOG_ERROR = 1,
    /// A lock was lost, a renewal failed, a node was unreachable.
    FENCELOCK_LOG_WARN = 2,
    /// Rare, notable events.
    FENCELOCK_LOG_INFO = 3,
    /// Each acquisition, release, extension and connection change.
    FENCELOCK_LOG_DEBUG = 4,
    /// Each renewal.
    FENCELOCK_LOG_TRACE = 5,
}

impl fencelock_log_level {
    fn threshold(self) -> Option<LogLevel> {
        LogLevel::from_number(self as u8)
    }
}

impl From<LogLevel> for fencelock_log_level {
    fn from(level: LogLevel) -> Self {
        crate::names::by_core_name("FENCELOCK_LOG_", level.name())
            .unwrap_or(fencelock_log_level::FENCELOCK_LOG_ERROR)
    }
}

/// One log record, lent to the callback for the duration of the call: copy
/// what you keep. Every string is NUL-terminated UTF-8 and never NULL.
#[repr(C)]
#[derive(Debug)]
pub struct fencelock_log_record {
    /// How much it matters (never `FENCELOCK_LOG_OFF`).
    pub level: fencelock_log_level,
    /// The module that emitted it, such as `fencelock::lock_state`.
    pub target: *const c_char,
    /// What happened, such as `lock lost`.
    pub message: *const c_char,
    /// What it happened to, as `name=value` pairs separated by spaces
    /// (`resource=jobs reason=expired`); empty when there are none.
    pub fields: *const c_char,
    /// `message`, a space and `fields` (just `message` without fields): the
    /// line to log.
    pub line: *const c_char,
}

/// Receives one log record on fencelock's log thread (never on the caller's
/// thread, never on the threads that do the I/O), one record at a time and
/// in order. It may call any fencelock function, and block: records that
/// arrive meanwhile wait in a bounded queue, and those that do not fit are
/// dropped and counted in a `warn` record (`log records dropped …
/// dropped=N`) delivered before the next one. It must not unwind (no C++
/// exception, no longjmp) out of the call.
pub type fencelock_log_callback =
    Option<unsafe extern "C" fn(record: *const fencelock_log_record, user_data: *mut c_void)>;

/// Forwards fencelock's log records at `level` and above to `callback` from
/// now on, in place of any earlier callback; a NULL `callback` or
/// `FENCELOCK_LOG_OFF` stops forwarding. Records never carry a password or
/// a lock's token (they may carry fencing tokens, which are not secrets).
///
/// `user_data` is passed back to every call and must be usable from another
/// thread; fencelock never dereferences it. After a replacement, the old
/// callback may still receive the record it is being called with: keep its
/// `user_data` alive until the new callback has been called once, or for
/// the life of the process.
///
/// Returns `FENCELOCK_STATUS_INVALID_ARGUMENT` for a level outside the enum,
/// or when another `tracing` subscriber is already installed in the process
/// (only a Rust host that links fencelock statically can have one).
/// Non-blocking; any thread.
///
/// # Safety
/// `callback` is NULL or a function of that signature that stays callable
/// for the life of the process; `error` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_log_forward(
    callback: fencelock_log_callback,
    user_data: *mut c_void,
    level: i32,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: `error` per the contract.
    unsafe {
        crate::boundary::boundary(error, || {
            let level = level_argument(level)?;
            match (callback, level.threshold()) {
                (Some(function), Some(threshold)) => {
                    let user_data = UserData(user_data);
                    fencelock::forward_logs(
                        Some(threshold),
                        Box::new(move |record| deliver(function, user_data, &record)),
                    )?;
                }
                _ => fencelock::stop_forwarding_logs(),
            }
            Ok(())
        })
    }
}

/// Changes the level records are forwarded at, keeping the callback;
/// `FENCELOCK_LOG_OFF` pauses forwarding. Returns
/// `FENCELOCK_STATUS_INVALID_ARGUMENT` for a level outside the enum (the
/// only failure). Non-blocking; any thread.
#[unsafe(no_mangle)]
pub extern "C" fn fencelock_log_set_level(level: i32) -> fencelock_status {
    boundary_status(|| {
        fencelock::set_log_level(level_argument(level)?.threshold());
        Ok(())
    })
}

fn level_argument(level: i32) -> FfiResult<fencelock_log_level> {
    use strum::VariantArray;
    fencelock_log_level::VARIANTS
        .iter()
        .copied()
        .find(|variant| *variant as i32 == level)
        .ok_or_else(|| {
            Failure::invalid(format!(
                "the log level {level} is not a fencelock_log_level: use FENCELOCK_LOG_OFF (0) to \
                 FENCELOCK_LOG_TRACE (5)"
            ))
        })
}

fn deliver(
    function: unsafe extern "C" fn(*const fencelock_log_record, *mut c_void),
    user_data: UserData,
    record: &LogRecord,
) {
    let fields: Vec<String> = record
        .fields
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    // c_string replaces an interior NUL (the core never logs one).
    let target = c_string(record.target.clone());
    let message = c_string(record.message.clone());
    let fields = c_string(fields.join(" "));
    let line = c_string(record.line());
    let c_record = fencelock_log_record {
        level: record.level.into(),
        target: target.as_ptr(),
        message: message.as_ptr(),
        fields: fields.as_ptr(),
        line: line.as_ptr(),
    };
    // SAFETY: the record and its strings outlive the call; the callback's
    // contract is the caller's (fencelock_log_forward).
    unsafe { function(&c_record, user_data.get()) };
}

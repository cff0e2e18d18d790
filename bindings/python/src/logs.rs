//! The core's events for Python's `logging` (issue 21): `fencelock/_logging.py`
//! hands [`_forward_logs`] a callable, which the core's log delivery thread
//! calls with each record; [`_set_log_level`] changes the level forwarded at
//! (the `fencelock` logger's, read by `fencelock.sync_log_level()`, which
//! every client constructor calls through [`sync_level`]).
//!
//! The delivery thread is fencelock's own (never a runtime worker, never the
//! caller's), so the callable may take the GIL and any `logging` lock. Once
//! the interpreter starts shutting down ([`_close_logs`], registered with
//! `atexit`) it never attaches again: attaching to a finalizing interpreter
//! would hang or end the thread.

use std::sync::{Mutex, MutexGuard};

use fencelock::{LogLevel, LogRecord};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;

use crate::errors::{core_error, invalid};

/// Whether Python code may still be called: false once `atexit` ran
/// [`_close_logs`]. The delivery thread holds it for the whole call of the
/// callable, so `_close_logs` returns only when no call is under way and none
/// will start.
static PYTHON_OPEN: Mutex<bool> = Mutex::new(true);

fn python_open() -> MutexGuard<'static, bool> {
    PYTHON_OPEN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `fencelock._logging.sync_log_level`, looked up once.
static SYNC_LEVEL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The level with number `level` (1 error … 5 trace), None for none.
fn level_arg(py: Python<'_>, level: Option<u8>) -> PyResult<Option<LogLevel>> {
    match level {
        None => Ok(None),
        Some(n) => LogLevel::from_number(n).map(Some).ok_or_else(|| {
            invalid(
                py,
                format!("a log level is 1 (error) to 5 (trace) or None (nothing), not {n}"),
            )
        }),
    }
}

/// Calls `sink(level, target, message, fields, line)` for each core event
/// at `level` (a number, 1 error … 5 trace; None: none) and above, from
/// fencelock's log delivery thread, in place of any earlier sink. `fields`
/// is a tuple of `(name, value)` string pairs; `line` is the message
/// followed by `name=value` for each field. An exception the sink raises is
/// reported through `sys.unraisablehook`.
#[pyfunction]
#[pyo3(signature = (sink, level))]
fn _forward_logs(py: Python<'_>, sink: Py<PyAny>, level: Option<u8>) -> PyResult<()> {
    let level = level_arg(py, level)?;
    if !sink.bind(py).is_callable() {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "the log sink must be callable",
        ));
    }
    fencelock::forward_logs(level, Box::new(move |record| deliver(&sink, record)))
        .map_err(|e| core_error(py, e))
}

/// One record to the Python sink, on the delivery thread.
fn deliver(sink: &Py<PyAny>, record: LogRecord) {
    let open = python_open();
    if !*open {
        return;
    }
    // `try_attach` also declines while the interpreter is not (or no longer) running.
    let _ = Python::try_attach(|py| {
        let line = record.line();
        let fields = record
            .fields
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()));
        let call = PyTuple::new(py, fields).and_then(|fields| {
            sink.bind(py).call1((
                record.level.number(),
                record.target.as_str(),
                record.message.as_str(),
                fields,
                line,
            ))
        });
        if let Err(err) = call {
            err.write_unraisable(py, Some(sink.bind(py)));
        }
    });
    drop(open);
}

/// Forwards at `level` (1 error … 5 trace; None: nothing) from now on.
#[pyfunction]
#[pyo3(signature = (level))]
fn _set_log_level(py: Python<'_>, level: Option<u8>) -> PyResult<()> {
    fencelock::set_log_level(level_arg(py, level)?);
    Ok(())
}

/// The level forwarded at now (1 error … 5 trace), None when nothing is.
#[pyfunction]
fn _log_level() -> Option<u8> {
    fencelock::log_level().map(LogLevel::number)
}

/// The interpreter is shutting down (an `atexit` hook): forwards nothing
/// more and never calls Python again. Waits (GIL released) for a record
/// being delivered.
#[pyfunction]
fn _close_logs(py: Python<'_>) {
    fencelock::stop_forwarding_logs();
    py.detach(|| *python_open() = false);
}

/// Re-reads the level to forward at from the `fencelock` logger (called as
/// each client is made). An exception is reported, never raised: logging
/// must not stop a client from being made.
pub(crate) fn sync_level(py: Python<'_>) {
    let synced = SYNC_LEVEL
        .get_or_try_init(py, || {
            py.import("fencelock._logging")?
                .getattr("sync_log_level")
                .map(Bound::unbind)
        })
        .and_then(|sync| sync.bind(py).call0());
    if let Err(err) = synced {
        err.write_unraisable(py, None);
    }
}

/// The module's log functions: private, so set as attributes (left out of `__all__`);
/// `fencelock/_logging.py` wraps them.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.setattr("_forward_logs", wrap_pyfunction!(_forward_logs, m)?)?;
    m.setattr("_set_log_level", wrap_pyfunction!(_set_log_level, m)?)?;
    m.setattr("_log_level", wrap_pyfunction!(_log_level, m)?)?;
    m.setattr("_close_logs", wrap_pyfunction!(_close_logs, m)?)?;
    Ok(())
}

//! `fencelock_status`: what every C function returns.

use std::ffi::{CStr, c_char};

use fencelock_core::ErrorKind;

/// The result of every fallible function. Values are stable and grouped:
/// `0` is success; `1..=99` mirror the core's error kinds (the same numbers
/// every front uses); `100..=199` are mistakes in the call itself; `200` and
/// above are fencelock's own failures.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum fencelock_status {
    /// Success.
    FENCELOCK_STATUS_OK = 0,
    /// The lock is held by another owner (a quorum of nodes said so).
    FENCELOCK_STATUS_NOT_ACQUIRED = 1,
    /// The wait ran out (acquire), or no event arrived in time (next_event).
    FENCELOCK_STATUS_TIMEOUT = 2,
    /// Not enough Redis nodes answered to decide.
    FENCELOCK_STATUS_UNAVAILABLE = 3,
    /// The lock was lost while held.
    FENCELOCK_STATUS_LOST = 4,
    /// The lock was no longer held when released or extended.
    FENCELOCK_STATUS_NOT_HELD = 5,
    /// A fenced write carried a token older than the stored one.
    FENCELOCK_STATUS_STALE_TOKEN = 6,
    /// An argument is out of range (empty or huge resource, ttl 0 or too large…).
    FENCELOCK_STATUS_INVALID_ARGUMENT = 7,
    /// The client configuration is invalid (bad URL, no nodes, zero timeout…).
    FENCELOCK_STATUS_CONFIG = 8,
    /// Redis refused the credentials, or the ACL user lacks a permission.
    FENCELOCK_STATUS_AUTH = 9,
    /// The TLS handshake or certificate verification failed.
    FENCELOCK_STATUS_TLS = 10,
    /// The client is closed, or the object was made before `fork()`.
    FENCELOCK_STATUS_CLOSED = 11,
    /// A blocking call was made on a thread of an async runtime (a tokio worker),
    /// which it would stall. Never returned to fencelock callbacks.
    FENCELOCK_STATUS_WOULD_BLOCK = 12,
    /// A required pointer argument was NULL.
    FENCELOCK_STATUS_NULL_ARGUMENT = 100,
    /// A string argument was not valid UTF-8.
    FENCELOCK_STATUS_INVALID_UTF8 = 101,
    /// The operation was cancelled with `fencelock_operation_cancel`.
    FENCELOCK_STATUS_CANCELLED = 102,
    /// A bug in fencelock (an internal panic was caught at the boundary).
    FENCELOCK_STATUS_INTERNAL = 200,
}

impl From<ErrorKind> for fencelock_status {
    fn from(kind: ErrorKind) -> Self {
        use fencelock_status::*;
        match kind {
            ErrorKind::NotAcquired => FENCELOCK_STATUS_NOT_ACQUIRED,
            ErrorKind::Timeout => FENCELOCK_STATUS_TIMEOUT,
            ErrorKind::Unavailable => FENCELOCK_STATUS_UNAVAILABLE,
            ErrorKind::Lost => FENCELOCK_STATUS_LOST,
            ErrorKind::NotHeld => FENCELOCK_STATUS_NOT_HELD,
            ErrorKind::StaleToken => FENCELOCK_STATUS_STALE_TOKEN,
            ErrorKind::InvalidArgument => FENCELOCK_STATUS_INVALID_ARGUMENT,
            ErrorKind::Config => FENCELOCK_STATUS_CONFIG,
            ErrorKind::Auth => FENCELOCK_STATUS_AUTH,
            ErrorKind::Tls => FENCELOCK_STATUS_TLS,
            ErrorKind::Closed => FENCELOCK_STATUS_CLOSED,
            ErrorKind::WouldBlock => FENCELOCK_STATUS_WOULD_BLOCK,
            // A kind added to the core later: still an error, never success.
            _ => FENCELOCK_STATUS_INTERNAL,
        }
    }
}

impl fencelock_status {
    /// Every status, for looking one up by value.
    const ALL: [fencelock_status; 17] = {
        use fencelock_status::*;
        [
            FENCELOCK_STATUS_OK,
            FENCELOCK_STATUS_NOT_ACQUIRED,
            FENCELOCK_STATUS_TIMEOUT,
            FENCELOCK_STATUS_UNAVAILABLE,
            FENCELOCK_STATUS_LOST,
            FENCELOCK_STATUS_NOT_HELD,
            FENCELOCK_STATUS_STALE_TOKEN,
            FENCELOCK_STATUS_INVALID_ARGUMENT,
            FENCELOCK_STATUS_CONFIG,
            FENCELOCK_STATUS_AUTH,
            FENCELOCK_STATUS_TLS,
            FENCELOCK_STATUS_CLOSED,
            FENCELOCK_STATUS_WOULD_BLOCK,
            FENCELOCK_STATUS_NULL_ARGUMENT,
            FENCELOCK_STATUS_INVALID_UTF8,
            FENCELOCK_STATUS_CANCELLED,
            FENCELOCK_STATUS_INTERNAL,
        ]
    };

    fn name(self) -> &'static CStr {
        use fencelock_status::*;
        match self {
            FENCELOCK_STATUS_OK => c"FENCELOCK_STATUS_OK",
            FENCELOCK_STATUS_NOT_ACQUIRED => c"FENCELOCK_STATUS_NOT_ACQUIRED",
            FENCELOCK_STATUS_TIMEOUT => c"FENCELOCK_STATUS_TIMEOUT",
            FENCELOCK_STATUS_UNAVAILABLE => c"FENCELOCK_STATUS_UNAVAILABLE",
            FENCELOCK_STATUS_LOST => c"FENCELOCK_STATUS_LOST",
            FENCELOCK_STATUS_NOT_HELD => c"FENCELOCK_STATUS_NOT_HELD",
            FENCELOCK_STATUS_STALE_TOKEN => c"FENCELOCK_STATUS_STALE_TOKEN",
            FENCELOCK_STATUS_INVALID_ARGUMENT => c"FENCELOCK_STATUS_INVALID_ARGUMENT",
            FENCELOCK_STATUS_CONFIG => c"FENCELOCK_STATUS_CONFIG",
            FENCELOCK_STATUS_AUTH => c"FENCELOCK_STATUS_AUTH",
            FENCELOCK_STATUS_TLS => c"FENCELOCK_STATUS_TLS",
            FENCELOCK_STATUS_CLOSED => c"FENCELOCK_STATUS_CLOSED",
            FENCELOCK_STATUS_WOULD_BLOCK => c"FENCELOCK_STATUS_WOULD_BLOCK",
            FENCELOCK_STATUS_NULL_ARGUMENT => c"FENCELOCK_STATUS_NULL_ARGUMENT",
            FENCELOCK_STATUS_INVALID_UTF8 => c"FENCELOCK_STATUS_INVALID_UTF8",
            FENCELOCK_STATUS_CANCELLED => c"FENCELOCK_STATUS_CANCELLED",
            FENCELOCK_STATUS_INTERNAL => c"FENCELOCK_STATUS_INTERNAL",
        }
    }
}

/// The name of a status value (`"FENCELOCK_STATUS_NOT_ACQUIRED"`), or
/// `"FENCELOCK_STATUS_UNKNOWN"` for a value this library does not define.
///
/// Takes an `int32_t` rather than the enum so any value read off the wire or
/// from another library version is safe to pass.
///
/// Ownership: the string is static; never free it. Never blocks; thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn fencelock_status_name(status: i32) -> *const c_char {
    fencelock_status::ALL
        .iter()
        .find(|known| **known as i32 == status)
        .map_or(c"FENCELOCK_STATUS_UNKNOWN", |known| known.name())
        .as_ptr()
}

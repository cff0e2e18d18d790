//! `fencelock_status`: what every C function returns.

use std::ffi::{CString, c_char};
use std::sync::LazyLock;

use fencelock::ErrorKind;
use strum::VariantArray;

/// The result of every fallible function. Values are stable and grouped:
/// `0` is success; `1..=99` are the core's error kinds (the same numbers
/// every front uses, listed in `tests/vectors/protocol.json`); `100..=199`
/// concern the call itself: mistakes in its arguments, and its cancellation
/// (`102`, the core's kind `cancelled`); `200` and above are fencelock's own
/// failures (`200` is the core's kind `internal`).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
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
    /// The operation was cancelled with `fencelock_operation_cancel`; the
    /// core's kind `cancelled`.
    FENCELOCK_STATUS_CANCELLED = 102,
    /// A bug in fencelock (an internal panic was caught at the boundary);
    /// the core's error kind `internal`.
    FENCELOCK_STATUS_INTERNAL = 200,
}

impl From<ErrorKind> for fencelock_status {
    /// The status with the kind's number (the core's codes are the C
    /// statuses); a kind this ABI lacks is still an error, never success.
    fn from(kind: ErrorKind) -> Self {
        fencelock_status::VARIANTS
            .iter()
            .copied()
            .find(|status| *status as i32 == kind.code())
            .unwrap_or(fencelock_status::FENCELOCK_STATUS_INTERNAL)
    }
}

/// Each status's name as a C string, in the order of `VARIANTS`.
static NAMES: LazyLock<Vec<CString>> = LazyLock::new(|| {
    fencelock_status::VARIANTS
        .iter()
        .map(|status| CString::new(<&str>::from(*status)).expect("an identifier has no NUL"))
        .collect()
});

/// The name of a status value (`"FENCELOCK_STATUS_NOT_ACQUIRED"`), or
/// `"FENCELOCK_STATUS_UNKNOWN"` for a value this library does not define.
///
/// Takes an `int32_t` rather than the enum so any value read off the wire or
/// from another library version is safe to pass.
///
/// Ownership: the string is static; never free it. Never blocks; thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn fencelock_status_name(status: i32) -> *const c_char {
    fencelock_status::VARIANTS
        .iter()
        .position(|known| *known as i32 == status)
        .map_or(c"FENCELOCK_STATUS_UNKNOWN", |index| NAMES[index].as_c_str())
        .as_ptr()
}

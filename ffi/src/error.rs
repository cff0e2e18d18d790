//! `fencelock_error`: the detail behind a failed status.

use std::ffi::{CString, c_char};
use std::ptr;

use fencelock::NodeReport;

use crate::names;
use crate::status::fencelock_status;

/// What one node answered, in a [`fencelock_error`]
/// (`tests/vectors/protocol.json`, `node_outcomes`).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
pub enum fencelock_node_outcome {
    /// The node did what was asked.
    FENCELOCK_NODE_OK = 0,
    /// Another owner holds the key on this node.
    FENCELOCK_NODE_HELD_BY_OTHER = 1,
    /// The key does not exist on this node.
    FENCELOCK_NODE_MISSING = 2,
    /// No reply within the per-node timeout.
    FENCELOCK_NODE_TIMED_OUT = 3,
    /// The node answered with an error or could not be reached (see the detail).
    FENCELOCK_NODE_FAILED = 4,
    /// The decision was reached before this node answered.
    FENCELOCK_NODE_PENDING = 5,
}

/// What every `fencelock_node_outcome` variant's name starts with.
pub(crate) const OUTCOME_PREFIX: &str = "FENCELOCK_NODE_";

/// Detail about a failure: status, a message for humans (what failed, on
/// which node, what to do) and what each node answered.
///
/// Created by fencelock, owned by the caller, freed with
/// [`fencelock_error_free`]. Immutable: any thread may read it.
pub struct fencelock_error {
    status: fencelock_status,
    message: CString,
    nodes: Vec<NodeEntry>,
}

struct NodeEntry {
    node: CString,
    outcome: fencelock_node_outcome,
    detail: CString,
}

impl fencelock_error {
    pub(crate) fn new(status: fencelock_status, message: String, nodes: Vec<NodeReport>) -> Self {
        fencelock_error {
            status,
            message: c_string(message),
            nodes: nodes.into_iter().map(NodeEntry::from).collect(),
        }
    }
}

impl From<NodeReport> for NodeEntry {
    fn from(report: NodeReport) -> Self {
        let outcome = names::by_core_name(OUTCOME_PREFIX, report.outcome.name())
            .unwrap_or(fencelock_node_outcome::FENCELOCK_NODE_FAILED);
        NodeEntry {
            detail: c_string(report.outcome.to_string()),
            node: c_string(report.node),
            outcome,
        }
    }
}

/// A C string from Rust text; an interior NUL (possible only in a Redis
/// error text) becomes U+FFFD rather than cutting the message short.
pub(crate) fn c_string(text: String) -> CString {
    CString::new(text).unwrap_or_else(|e| {
        let text = String::from_utf8_lossy(&e.into_vec()).replace('\0', "\u{FFFD}");
        CString::new(text).expect("NULs were replaced")
    })
}

/// The status `error` describes; `FENCELOCK_STATUS_NULL_ARGUMENT` when `error` is NULL.
///
/// `error`: borrowed, may be NULL. Never blocks; thread-safe.
///
/// # Safety
/// `error` is NULL or a live error from this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_error_status(error: *const fencelock_error) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe { error.as_ref() }.map_or(fencelock_status::FENCELOCK_STATUS_NULL_ARGUMENT, |e| e.status)
}

/// The message: what failed, where, and what to do. NUL-terminated UTF-8.
///
/// Ownership: the string belongs to `error` and lives until
/// [`fencelock_error_free`]; do not free it. Returns NULL when `error` is NULL.
/// Never blocks; thread-safe.
///
/// # Safety
/// `error` is NULL or a live error from this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_error_message(error: *const fencelock_error) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { error.as_ref() }.map_or(ptr::null(), |e| e.message.as_ptr())
}

/// How many nodes reported on the failed operation (0 when it reached none,
/// or when `error` is NULL). Never blocks; thread-safe.
///
/// # Safety
/// `error` is NULL or a live error from this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_error_node_count(error: *const fencelock_error) -> usize {
    // SAFETY: per the contract.
    unsafe { error.as_ref() }.map_or(0, |e| e.nodes.len())
}

/// What node `index` (0-based, below [`fencelock_error_node_count`]) answered.
///
/// Writes the node's URL (password removed), its outcome and a readable
/// detail. Each out-pointer may be NULL to skip that field. The strings
/// belong to `error` and live until [`fencelock_error_free`].
///
/// Returns `FENCELOCK_STATUS_NULL_ARGUMENT` when `error` is NULL and
/// `FENCELOCK_STATUS_INVALID_ARGUMENT` when `index` is out of range; nothing
/// is written then. Never blocks; thread-safe.
///
/// # Safety
/// `error` is NULL or from this library; each out-pointer is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_error_node(
    error: *const fencelock_error,
    index: usize,
    node: *mut *const c_char,
    outcome: *mut fencelock_node_outcome,
    detail: *mut *const c_char,
) -> fencelock_status {
    // Plain returns rather than the boundary: nothing here can panic, and the
    // boundary's own error type is the one being read.
    // SAFETY: per the function's contract.
    let Some(error) = (unsafe { error.as_ref() }) else {
        return fencelock_status::FENCELOCK_STATUS_NULL_ARGUMENT;
    };
    let Some(entry) = error.nodes.get(index) else {
        return fencelock_status::FENCELOCK_STATUS_INVALID_ARGUMENT;
    };
    // SAFETY: each is NULL or writable, per the function's contract.
    unsafe {
        write_if_wanted(node, entry.node.as_ptr());
        write_if_wanted(outcome, entry.outcome);
        write_if_wanted(detail, entry.detail.as_ptr());
    }
    fencelock_status::FENCELOCK_STATUS_OK
}

/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn write_if_wanted<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: per the function's contract.
        unsafe { out.write(value) };
    }
}

/// Frees an error. NULL is a no-op. Never blocks.
///
/// # Safety
/// `error` is NULL or an error from this library not freed before; it must
/// not be used afterwards (nor the strings read from it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_error_free(error: *mut fencelock_error) {
    if !error.is_null() {
        // SAFETY: the caller hands back ownership of a Box we made.
        drop(unsafe { Box::from_raw(error) });
    }
}

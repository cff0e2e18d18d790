//! What operators see, from C: each node's view of one lock
//! (`Client::inspect`, which every front wraps), as a `fencelock_inspection`
//! read entry by entry. Read-only, and never the owner's token.

use std::ffi::{CString, c_char, c_void};
use std::ptr;

use fencelock::{Client, LockOptions, NodeLockState};

use crate::args;
use crate::boundary::{Failure, FfiResult, boundary};
use crate::client::fencelock_client;
use crate::dispatch::UserData;
use crate::error::{c_string, fencelock_error};
use crate::operation::{fencelock_operation, into_status, start};
use crate::status::fencelock_status;

/// One node's view of a lock, in a [`fencelock_inspection`].
///
/// Owned by the inspection it came from: read it, never free or modify it;
/// it and its strings live until [`fencelock_inspection_free`]. Later
/// versions only append fields (the library owns the struct, so a program
/// built against this header keeps working).
#[repr(C)]
#[derive(Debug)]
pub struct fencelock_node_lock_state {
    /// The node's URL without credentials: NUL-terminated UTF-8, never NULL.
    pub node: *const c_char,
    /// Whether the lock key exists on that node.
    pub held: bool,
    /// Whether `ttl_ms` is the key's remaining ttl: false when the key does
    /// not exist there, has no ttl, or the node did not answer.
    pub has_ttl: bool,
    /// The key's remaining ttl in ms when `has_ttl`, else 0.
    pub ttl_ms: u64,
    /// The resource's fencing counter on that node: how many grants it has
    /// counted there, ever (0 when none, or when the node did not answer).
    pub fencing_counter: u64,
    /// The waiters in the lock's queue on that node whose lease still runs
    /// (docs/protocol.md §4.9).
    pub waiters: u64,
    /// NULL when the node answered; otherwise why it did not (NUL-terminated
    /// UTF-8), and the other fields say nothing about it.
    pub error: *const c_char,
}

/// Each node's view of one lock, from [`fencelock_inspect`] or
/// [`fencelock_inspect_async`]: one entry per node of the client, in the
/// order of the client's nodes (the URLs given to `fencelock_client_new`).
/// For monitoring: out of date as soon as it is read.
///
/// Owned by the caller and freed with [`fencelock_inspection_free`].
/// Immutable: any thread may read it, concurrently.
pub struct fencelock_inspection {
    entries: Vec<fencelock_node_lock_state>,
    /// What the entries' strings point into. A `CString`'s bytes stay where
    /// they are when the `CString` moves.
    _strings: Vec<CString>,
}

impl fencelock_inspection {
    fn new(states: Vec<NodeLockState>) -> Self {
        let mut strings = Vec::with_capacity(states.len());
        let entries = states
            .into_iter()
            .map(|state| {
                let node = c_string(state.node);
                let error = state.error.map(c_string);
                let entry = fencelock_node_lock_state {
                    node: node.as_ptr(),
                    held: state.held,
                    has_ttl: state.ttl_ms.is_some(),
                    ttl_ms: state.ttl_ms.unwrap_or(0),
                    fencing_counter: state.fencing_counter,
                    waiters: state.waiters,
                    error: error.as_ref().map_or(ptr::null(), |e| e.as_ptr()),
                };
                strings.push(node);
                strings.extend(error);
                entry
            })
            .collect();
        fencelock_inspection {
            entries,
            _strings: strings,
        }
    }
}

/// Called once when a [`fencelock_inspect_async`] ends, on fencelock's
/// callback thread.
///
/// On `FENCELOCK_STATUS_OK`, `inspection` is the answer and `error` is NULL;
/// otherwise `inspection` is NULL and `error` holds the detail (`CANCELLED`
/// after `fencelock_operation_cancel`). Both become the callback's to free
/// (`fencelock_inspection_free`, `fencelock_error_free`), now or later from
/// any thread. Same rules as [`crate::fencelock_acquire_callback`].
pub type fencelock_inspect_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: fencelock_status,
        inspection: *mut fencelock_inspection,
        error: *mut fencelock_error,
    ),
>;

/// Checks a resource name the way the inspection will, without any I/O.
fn check_resource(client: &Client, resource: &str) -> FfiResult {
    // The rule of a resource is the lock's: check it as a request with a
    // ttl that is always valid, so only the name can be refused.
    Ok(client.check_request(resource, &LockOptions::new(fencelock::MIN_TTL))?)
}

/// Each node's view of the lock on `resource`: held or not, the ttl left,
/// the fencing counter and the live waiters, or the node's error. One
/// read-only script per node, all at once; the owner's token is never
/// read. For operators (`fencelock inspect` shows the same).
///
/// * `resource`: NUL-terminated UTF-8, 1 to `FENCELOCK_MAX_RESOURCE_BYTES`
///   bytes, borrowed for the call.
/// * `out`: receives the inspection on success only; read it with
///   [`fencelock_inspection_node_count`] and [`fencelock_inspection_node`],
///   free it with [`fencelock_inspection_free`].
/// * `error`: NULL, or receives detail on failure.
///
/// A node that does not answer does not fail the call: its entry's `error`
/// says why. Statuses: `OK`; `INVALID_ARGUMENT` (empty, oversized or
/// malformed resource); `INVALID_UTF8`; `NULL_ARGUMENT`; `CLOSED` (the client
/// used after `fork()`); `WOULD_BLOCK` (on a thread of an async
/// runtime).
///
/// Blocks for one round trip to the nodes, each bounded by the connect
/// timeout; use [`fencelock_inspect_async`] not to block. Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `resource` is NULL or NUL-terminated; `out`
/// and `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_inspect(
    client: *const fencelock_client,
    resource: *const c_char,
    out: *mut *mut fencelock_inspection,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let client = args::object(client, "client")?.inner.clone();
            let resource = args::text(resource, "resource")?.to_owned();
            let out = args::out(out, "out")?;
            let states = fencelock::block_on(async move { client.inspect(&resource).await })??;
            args::give(out, fencelock_inspection::new(states));
            Ok(())
        })
    }
}

/// Starts [`fencelock_inspect`] and returns at once; `callback` gets the
/// inspection (the callback's to free) or the failure exactly once, on
/// fencelock's callback thread, possibly before this function returns.
///
/// `operation_out`, `user_data` and the returned status as
/// [`crate::fencelock_acquire_async`]: a bad resource fails this call
/// (`INVALID_ARGUMENT`, `INVALID_UTF8`), as does a NULL `client`,
/// `resource` or `callback` (`NULL_ARGUMENT`), and the callback is then
/// never called. [`crate::fencelock_operation_cancel`] stops a read in
/// flight: the callback then gets `CANCELLED`. Never blocks. Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `resource` is NULL or NUL-terminated;
/// `callback` is NULL or a function of that type; `operation_out` and
/// `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_inspect_async(
    client: *const fencelock_client,
    resource: *const c_char,
    callback: fencelock_inspect_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: per the contract.
    unsafe {
        boundary(error, || {
            let client = args::object(client, "client")?.inner.clone();
            let resource = args::text(resource, "resource")?.to_owned();
            let callback = callback.ok_or_else(|| Failure::null("callback"))?;
            check_resource(&client, &resource)?;
            let work = async move { Ok(client.inspect(&resource).await?) };
            start(
                work,
                deliver_inspection(callback, UserData(user_data)),
                operation_out,
            )
        })
    }
}

/// What ends a [`fencelock_inspect_async`]: hands the inspection (the
/// callback's to free) or the failure to `callback`.
fn deliver_inspection(
    callback: unsafe extern "C" fn(
        *mut c_void,
        fencelock_status,
        *mut fencelock_inspection,
        *mut fencelock_error,
    ),
    user_data: UserData,
) -> impl FnOnce(FfiResult<Vec<NodeLockState>>) + Send + 'static {
    move |result| {
        let (inspection, result) = match result {
            Ok(states) => (Box::into_raw(Box::new(fencelock_inspection::new(states))), Ok(())),
            Err(failure) => (ptr::null_mut(), Err(failure)),
        };
        let (status, error) = into_status(result);
        // SAFETY: the caller's callback, called once with what it documents.
        unsafe { callback(user_data.get(), status, inspection, error) };
    }
}

/// How many entries `inspection` has: one per node of the client that made
/// it (0 when `inspection` is NULL). Never blocks; thread-safe.
///
/// # Safety
/// `inspection` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_inspection_node_count(inspection: *const fencelock_inspection) -> usize {
    // SAFETY: per the contract.
    unsafe { inspection.as_ref() }.map_or(0, |i| i.entries.len())
}

/// Entry `index` (0-based, below [`fencelock_inspection_node_count`]) of
/// `inspection`: one node's view. NULL when `inspection` is NULL or `index`
/// is out of range.
///
/// Ownership: the entry and its strings belong to `inspection` and live
/// until [`fencelock_inspection_free`]; do not free or modify them. Never
/// blocks; thread-safe.
///
/// # Safety
/// `inspection` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_inspection_node(
    inspection: *const fencelock_inspection,
    index: usize,
) -> *const fencelock_node_lock_state {
    // SAFETY: per the contract.
    unsafe { inspection.as_ref() }
        .and_then(|i| i.entries.get(index))
        .map_or(ptr::null(), ptr::from_ref)
}

/// Frees an inspection, its entries and their strings. NULL is a no-op.
/// Never blocks.
///
/// # Safety
/// `inspection` is NULL or from this library, not freed before; neither it
/// nor anything read from it is used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_inspection_free(inspection: *mut fencelock_inspection) {
    // SAFETY: per the contract.
    drop(unsafe { args::take(inspection) });
}

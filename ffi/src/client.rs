//! `fencelock_client`: a connection to one Redis node or a Redlock set.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use fencelock::{Client, ClientBuilder};

use crate::args;
use crate::boundary::{Failure, FfiResult, boundary, boundary_status};
use crate::dispatch::UserData;
use crate::error::fencelock_error;
use crate::events::{EventHub, fencelock_event, fencelock_event_callback};
use crate::operation::{fencelock_operation, into_status, start};
use crate::options::fencelock_options;
use crate::status::fencelock_status;

/// A client of one Redis node (single-node locks) or of N independent
/// masters (Redlock, quorum N/2+1).
///
/// Made by [`fencelock_client_new`], freed by [`fencelock_client_free`].
/// Thread-safe: any number of threads may use one client at once.
pub struct fencelock_client {
    pub(crate) inner: Client,
    pub(crate) events: Arc<EventHub>,
}

/// Connects to the nodes in `urls` (`redis://[user:password@]host:port[/db]`,
/// `rediss://` for TLS, `redis+cluster://` for one Redis Cluster).
///
/// * `urls`: `n_urls` NUL-terminated strings, borrowed for the call.
///   `n_urls == 0` is `FENCELOCK_STATUS_CONFIG`.
/// * `options`: NULL for defaults, else borrowed for the call (the client
///   copies what it needs).
/// * `out`: receives the client on success.
/// * `error`: NULL, or receives detail on failure (free it with
///   `fencelock_error_free`).
///
/// Fails with `FENCELOCK_STATUS_CONFIG` (bad URL, duplicate node, bad
/// option), `_AUTH` or `_TLS` when a node refuses us. A node that is merely
/// down does not fail the call: locks need only a majority.
///
/// Blocks while connecting (up to the connect timeout, default 1 s); may be
/// called from a fencelock callback. Returns `FENCELOCK_STATUS_WOULD_BLOCK`
/// on a thread of an async runtime. Thread-safe.
///
/// # Safety
/// `urls` is NULL or valid for `n_urls` pointers, each NULL or NUL-terminated;
/// `options` is NULL or live; `out` and `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_new(
    urls: *const *const c_char,
    n_urls: usize,
    options: *const fencelock_options,
    out: *mut *mut fencelock_client,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: `error` per the contract; the body reads the rest under the same contract.
    unsafe {
        boundary(error, || {
            let out = args::out(out, "out")?;
            let builder = options
                .as_ref()
                .map_or_else(ClientBuilder::default, |options| options.builder.clone())
                .nodes(node_urls(urls, n_urls)?);
            let inner = fencelock::block_on(builder.build())??;
            let client = fencelock_client {
                inner,
                events: Arc::new(EventHub::default()),
            };
            args::give(out, client);
            Ok(())
        })
    }
}

/// Called once when a [`fencelock_client_new_async`] ends, on fencelock's
/// callback thread. On `FENCELOCK_STATUS_OK`, `client` is the new client
/// and `error` is NULL; otherwise `client` is NULL and `error` holds the
/// detail (`CANCELLED` after `fencelock_operation_cancel`). Both become the
/// callback's to free (`fencelock_client_free`, `fencelock_error_free`), now
/// or later from any thread. Same rules as
/// [`crate::fencelock_acquire_callback`].
pub type fencelock_client_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        status: fencelock_status,
        client: *mut fencelock_client,
        error: *mut fencelock_error,
    ),
>;

/// Starts connecting as [`fencelock_client_new`] does and returns at once;
/// `callback` gets the client (the callback's to free) or the failure
/// exactly once, on fencelock's callback thread, possibly before this
/// function returns.
///
/// `urls` and `options` are copied before this returns (free them right
/// after). `operation_out`, `user_data` and the returned status as
/// [`crate::fencelock_acquire_async`]: a NULL `urls` (with `n_urls` above
/// 0) or `callback` (`NULL_ARGUMENT`) or a URL that is not UTF-8
/// (`INVALID_UTF8`) fails this call, and the callback is then never called.
/// What [`fencelock_client_new`] returns as a status (`CONFIG` for no
/// nodes, a bad URL or option; `AUTH`; `TLS`) goes to the callback.
/// [`crate::fencelock_operation_cancel`] stops the connecting: the callback
/// then gets `CANCELLED` at once, and the client being made is dropped
/// (its connecting, in the background, ends within the connect timeout).
/// Never blocks. Thread-safe.
///
/// # Safety
/// `urls` is NULL or valid for `n_urls` pointers, each NULL or
/// NUL-terminated; `options` is NULL or live; `callback` is NULL or a
/// function of that type; `operation_out` and `error` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_new_async(
    urls: *const *const c_char,
    n_urls: usize,
    options: *const fencelock_options,
    callback: fencelock_client_callback,
    user_data: *mut c_void,
    operation_out: *mut *mut fencelock_operation,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: `error` per the contract; the body reads the rest under the same contract.
    unsafe {
        boundary(error, || {
            let callback = callback.ok_or_else(|| Failure::null("callback"))?;
            let builder = options
                .as_ref()
                .map_or_else(ClientBuilder::default, |options| options.builder.clone())
                .nodes(node_urls(urls, n_urls)?);
            let work = async move {
                let inner = builder.build().await?;
                Ok(fencelock_client {
                    inner,
                    events: Arc::new(EventHub::default()),
                })
            };
            start(work, deliver_client(callback, UserData(user_data)), operation_out)
        })
    }
}

/// What ends a [`fencelock_client_new_async`]: hands the client (the
/// callback's to free) or the failure to `callback`.
fn deliver_client(
    callback: unsafe extern "C" fn(
        *mut c_void,
        fencelock_status,
        *mut fencelock_client,
        *mut fencelock_error,
    ),
    user_data: UserData,
) -> impl FnOnce(FfiResult<fencelock_client>) + Send + 'static {
    move |result| {
        let (client, result) = match result {
            Ok(client) => (Box::into_raw(Box::new(client)), Ok(())),
            Err(failure) => (std::ptr::null_mut(), Err(failure)),
        };
        let (status, error) = into_status(result);
        // SAFETY: the caller's callback, called once with what it documents.
        unsafe { callback(user_data.get(), status, client, error) };
    }
}

/// # Safety
/// As [`fencelock_client_new`].
unsafe fn node_urls(urls: *const *const c_char, n_urls: usize) -> FfiResult<Vec<String>> {
    if n_urls == 0 {
        return Ok(Vec::new()); // the core's validation explains an empty list
    }
    if urls.is_null() {
        return Err(Failure::null("urls"));
    }
    // SAFETY: per the contract, `urls` holds `n_urls` pointers.
    let urls = unsafe { std::slice::from_raw_parts(urls, n_urls) };
    urls.iter()
        .enumerate()
        // SAFETY: each is NULL or NUL-terminated, per the contract.
        .map(|(i, url)| unsafe { args::text(*url, &format!("urls[{i}]")) }.map(str::to_owned))
        .collect()
}

/// Closes the client and frees it. NULL is a no-op.
///
/// Does no network I/O. Locks acquired through this client stay valid: each
/// must still be released or freed, and keeps being renewed until then.
/// Operations in flight finish and call their callbacks.
///
/// When this returns, no call of the client's event callback is running or
/// can start: its `user_data` may be freed right away. For that it waits
/// while a call of the event callback is in progress (so do not call it
/// while holding a lock that callback takes), and for nothing else. Called
/// from inside a fencelock callback it never waits: the only call that can
/// be in progress is the caller's own, and the event callback is not called
/// again once that one returns.
///
/// # Safety
/// `client` is NULL or from `fencelock_client_new`, not freed before, and not
/// in use by another thread during or after this call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_free(client: *mut fencelock_client) {
    // SAFETY: per the contract.
    if let Some(client) = unsafe { args::take(client) } {
        client.inner.close();
        // Locks outlive the client; their losses must not reach a callback
        // whose user_data the caller may free next.
        client.events.unsubscribe();
    }
}

/// Sends this client's events to `callback` (on fencelock's callback thread)
/// instead of the queue; NULL goes back to queueing. Events queued before
/// are delivered to the new callback first, in order; with NULL, events not
/// delivered yet stay queued for [`fencelock_client_next_event`].
///
/// `user_data` is passed back untouched and must be usable from another
/// thread. When this returns, no call of the callback it replaced (or
/// cleared) is running or can start, so the old `user_data` may be freed
/// right away: for that it waits while such a call is in progress (so do not
/// call it while holding a lock that callback takes). Called from inside a
/// fencelock callback it returns at once: calls run one at a time, so the
/// only call that can be in progress is the caller's own. A callback may thus
/// clear itself and free its own `user_data`, as long as it does not touch
/// it afterwards.
///
/// Fails with `FENCELOCK_STATUS_CLOSED` if the callback thread cannot be
/// started. Thread-safe.
///
/// # Safety
/// `client` is NULL or live; `callback` is NULL or a function with this signature.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_set_event_callback(
    client: *const fencelock_client,
    callback: fencelock_event_callback,
    user_data: *mut c_void,
) -> fencelock_status {
    boundary_status(|| {
        // SAFETY: per the contract.
        let client = unsafe { args::object(client, "client") }?;
        client.events.set_callback(callback, user_data)
    })
}

/// Takes the next queued event, waiting up to `timeout_ms` (0: just look).
///
/// On `FENCELOCK_STATUS_OK`, `*event` is filled in and owns its `resource`
/// string: release it with [`fencelock_event_clear`]. Returns
/// `FENCELOCK_STATUS_TIMEOUT` (and leaves `*event` alone) when no event came
/// in time, and `FENCELOCK_STATUS_WOULD_BLOCK` when called with a non-zero
/// timeout on a thread of an async runtime. While an event callback is set,
/// events are the callback's: this finds none.
///
/// Blocks the calling thread up to `timeout_ms` (from a fencelock callback
/// too, holding up later callbacks). Thread-safe: each event goes to exactly
/// one caller.
///
/// # Safety
/// `client` is NULL or live; `event` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_next_event(
    client: *const fencelock_client,
    timeout_ms: u64,
    event: *mut fencelock_event,
) -> fencelock_status {
    boundary_status(|| {
        // SAFETY: per the contract.
        let client = unsafe { args::object(client, "client") }?;
        let out = args::out(event, "event")?;
        if timeout_ms > 0 && tokio::runtime::Handle::try_current().is_ok() {
            return Err(Failure::new(
                fencelock_status::FENCELOCK_STATUS_WOULD_BLOCK,
                "fencelock_client_next_event would block a thread of an async runtime; poll with timeout 0 here",
            ));
        }
        let next = client.events.next(args::millis(timeout_ms)).ok_or_else(|| {
            Failure::new(
                fencelock_status::FENCELOCK_STATUS_TIMEOUT,
                format!("no event within {timeout_ms} ms"),
            )
        })?;
        // SAFETY: checked non-NULL; the caller promised it is writable.
        unsafe { out.write(next.into_owned()) };
        Ok(())
    })
}

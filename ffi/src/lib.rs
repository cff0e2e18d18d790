//! The C ABI of fencelock: `libfencelock.so` / `libfencelock.a` with the
//! header `include/fencelock.h` (generated from this crate by cbindgen).
//!
//! This crate translates and does nothing else: every decision about locks
//! lives in the core crate. The conventions every function follows:
//!
//! * It returns a [`fencelock_status`]; results go to out-parameters that are
//!   written only on success.
//! * Detail about a failure goes to an optional `fencelock_error **` (pass
//!   NULL to skip it), which the caller frees with [`fencelock_error_free`].
//! * No panic crosses the boundary: every `extern "C"` function runs its body
//!   through [`boundary`], which turns a panic into
//!   [`fencelock_status::FENCELOCK_STATUS_INTERNAL`].
//! * `*_free(NULL)` is a no-op; any other NULL argument is
//!   [`fencelock_status::FENCELOCK_STATUS_NULL_ARGUMENT`].
//! * Strings in are NUL-terminated UTF-8; other bytes are
//!   [`fencelock_status::FENCELOCK_STATUS_INVALID_UTF8`].
//! * C code is called only on the callback thread (`dispatch.rs`), never on
//!   the runtime that does the I/O: a slow callback cannot stall renewals.
#![allow(non_camel_case_types)]

mod args;
mod boundary;
mod client;
mod dispatch;
mod election;
mod error;
mod events;
mod fence;
mod fenced;
mod inspect;
mod limits;
mod lock;
mod lock_options;
mod log;
mod loss_reason;
mod lost;
mod metrics;
mod names;
mod observation;
mod operation;
mod options;
mod rw_lock;
mod semaphore;
mod settle;
mod status;
mod version;

pub use client::*;
pub use election::*;
pub use error::*;
pub use events::*;
pub use fence::*;
pub use fenced::*;
pub use inspect::*;
pub use limits::*;
pub use lock::*;
pub use lock_options::*;
pub use log::*;
pub use loss_reason::*;
pub use lost::*;
pub use metrics::*;
pub use observation::*;
pub use operation::*;
pub use options::*;
pub use rw_lock::*;
pub use semaphore::*;
pub use settle::*;
pub use status::*;
pub use version::*;

#[cfg(test)]
mod tests;

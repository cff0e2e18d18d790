//! The one place where Rust results and panics become C statuses.

use std::panic::{AssertUnwindSafe, catch_unwind};

use fencelock::{Error, NodeReport};

use crate::error::fencelock_error;
use crate::status::fencelock_status;

/// A failure on its way to C: the status to return and the detail for
/// `fencelock_error`.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: fencelock_status,
    pub(crate) message: String,
    pub(crate) nodes: Vec<NodeReport>,
}

/// What a function body returns before the boundary turns it into a status.
pub(crate) type FfiResult<T = ()> = Result<T, Failure>;

impl Failure {
    pub(crate) fn new(status: fencelock_status, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
            nodes: Vec::new(),
        }
    }

    pub(crate) fn null(argument: &str) -> Self {
        Failure::new(
            fencelock_status::FENCELOCK_STATUS_NULL_ARGUMENT,
            format!("argument `{argument}` is NULL; pass a valid pointer"),
        )
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Failure::new(fencelock_status::FENCELOCK_STATUS_INVALID_ARGUMENT, message)
    }

    fn panic(payload: &(dyn std::any::Any + Send)) -> Self {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        Failure::new(
            fencelock_status::FENCELOCK_STATUS_INTERNAL,
            format!("internal error in fencelock (a bug, please report it): {what}"),
        )
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure {
            status: error.kind().into(),
            // Display adds what each node answered: C callers see it in one string.
            message: error.to_string(),
            nodes: error.nodes().to_vec(),
        }
    }
}

impl From<Failure> for fencelock_error {
    fn from(failure: Failure) -> Self {
        fencelock_error::new(failure.status, failure.message, failure.nodes)
    }
}

/// Runs a function body with panics caught; returns its status and hands any
/// failure's detail to `error_out` (which may be NULL).
///
/// # Safety
/// `error_out` is NULL or valid for one pointer write.
pub(crate) unsafe fn boundary(
    error_out: *mut *mut fencelock_error,
    body: impl FnOnce() -> FfiResult,
) -> fencelock_status {
    match run_caught(body) {
        Ok(()) => fencelock_status::FENCELOCK_STATUS_OK,
        Err(failure) => {
            let status = failure.status;
            if !error_out.is_null() {
                // SAFETY: per this function's contract, `error_out` is writable.
                unsafe { *error_out = Box::into_raw(Box::new(fencelock_error::from(failure))) };
            }
            status
        }
    }
}

/// [`boundary`] for functions that have no error out-parameter.
pub(crate) fn boundary_status(body: impl FnOnce() -> FfiResult) -> fencelock_status {
    match run_caught(body) {
        Ok(()) => fencelock_status::FENCELOCK_STATUS_OK,
        Err(failure) => failure.status,
    }
}

/// Runs `body`, turning a panic into a [`Failure`].
pub(crate) fn run_caught<T>(body: impl FnOnce() -> FfiResult<T>) -> FfiResult<T> {
    // Unwind safety: a panicking body leaves no half-updated state that
    // C can observe: out-parameters are written only after success.
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| Err(Failure::panic(payload.as_ref())))
}

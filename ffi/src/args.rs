//! Reading C arguments: pointers, strings and durations.

use std::ffi::{CStr, c_char};
use std::time::Duration;

use crate::boundary::{Failure, FfiResult};
use crate::status::fencelock_status;

/// Borrows a NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn text<'a>(ptr: *const c_char, name: &str) -> FfiResult<&'a str> {
    if ptr.is_null() {
        return Err(Failure::null(name));
    }
    // SAFETY: non-NULL and NUL-terminated per the contract.
    let bytes = unsafe { CStr::from_ptr(ptr) };
    bytes.to_str().map_err(|e| {
        Failure::new(
            fencelock_status::FENCELOCK_STATUS_INVALID_UTF8,
            format!(
                "argument `{name}` is not valid UTF-8 (bad byte at offset {}); pass UTF-8 text",
                e.valid_up_to()
            ),
        )
    })
}

/// Borrows an optional string argument: NULL is `None`.
///
/// # Safety
/// As [`text`].
pub(crate) unsafe fn optional_text<'a>(ptr: *const c_char, name: &str) -> FfiResult<Option<&'a str>> {
    if ptr.is_null() {
        Ok(None)
    } else {
        // SAFETY: per the contract.
        unsafe { text(ptr, name) }.map(Some)
    }
}

/// Borrows a byte buffer argument.
///
/// # Safety
/// `ptr` is NULL or valid for `len` bytes that outlive `'a`.
pub(crate) unsafe fn bytes<'a>(ptr: *const u8, len: usize, name: &str) -> FfiResult<&'a [u8]> {
    if ptr.is_null() {
        return Err(Failure::null(name));
    }
    // SAFETY: per the contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows an object argument.
///
/// # Safety
/// `ptr` is NULL or points to a live `T` made by this library.
pub(crate) unsafe fn object<'a, T>(ptr: *const T, name: &str) -> FfiResult<&'a T> {
    // SAFETY: per the contract.
    unsafe { ptr.as_ref() }.ok_or_else(|| Failure::null(name))
}

/// Checks that an out-parameter can be written, before any work is done.
pub(crate) fn out<T>(ptr: *mut T, name: &str) -> FfiResult<*mut T> {
    if ptr.is_null() {
        Err(Failure::null(name))
    } else {
        Ok(ptr)
    }
}

/// Milliseconds from C. Every `uint64_t` is a valid `Duration`; the core
/// rejects values outside its ranges (ttl 0, ttl above `INT32_MAX` ms…).
pub(crate) fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Hands a new object to C through an out-parameter.
///
/// # Safety
/// `out` was checked by [`out`] and is valid for one pointer write.
pub(crate) unsafe fn give<T>(out: *mut *mut T, value: T) {
    // SAFETY: per the contract.
    unsafe { out.write(Box::into_raw(Box::new(value))) };
}

/// Takes back an object C is done with. NULL is `None`.
///
/// # Safety
/// `ptr` is NULL or came from [`give`] and is not used again.
pub(crate) unsafe fn take<T>(ptr: *mut T) -> Option<Box<T>> {
    // SAFETY: per the contract.
    (!ptr.is_null()).then(|| unsafe { Box::from_raw(ptr) })
}

//! Checks of numbers arriving from JavaScript.
//!
//! The JavaScript layer (`lib/args.js`) validates every argument first and
//! throws `TypeError`/`RangeError` naming it; these checks guard the native
//! module when it is called directly, with the same rules.

use std::ptr;
use std::time::Duration;

use napi::{Env, Status, sys};

/// The largest integer a JavaScript number holds exactly (2^53 − 1).
pub(crate) const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Throws a `RangeError` (or `TypeError` when `type_error`) with `message`.
pub(crate) fn throw(env: &Env, type_error: bool, message: &str) -> napi::Error {
    let mut text = ptr::null_mut();
    let mut error = ptr::null_mut();
    // SAFETY: on the JavaScript thread of `env`.
    unsafe {
        sys::napi_create_string_utf8(
            env.raw(),
            message.as_ptr().cast(),
            message.len() as isize,
            &mut text,
        );
        if type_error {
            sys::napi_create_type_error(env.raw(), ptr::null_mut(), text, &mut error);
        } else {
            sys::napi_create_range_error(env.raw(), ptr::null_mut(), text, &mut error);
        }
        sys::napi_throw(env.raw(), error);
    }
    napi::Error::new(Status::PendingException, message.to_owned())
}

/// A whole, non-negative number of milliseconds, as a `Duration`.
pub(crate) fn millis(env: &Env, name: &str, value: f64) -> napi::Result<Duration> {
    if value.is_nan() {
        return Err(throw(
            env,
            true,
            &format!("{name} must be a number of milliseconds, got NaN"),
        ));
    }
    if !value.is_finite() || !(0.0..=MAX_SAFE_INTEGER).contains(&value) || value.fract() != 0.0 {
        return Err(throw(
            env,
            false,
            &format!("{name} must be a whole number of milliseconds from 0 to 2^53-1, got {value}"),
        ));
    }
    Ok(Duration::from_millis(value as u64))
}

/// Like [`millis`], for an optional argument.
pub(crate) fn opt_millis(env: &Env, name: &str, value: Option<f64>) -> napi::Result<Option<Duration>> {
    value.map(|v| millis(env, name, v)).transpose()
}

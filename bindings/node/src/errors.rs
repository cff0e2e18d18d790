//! Core errors as instances of the JavaScript error classes.
//!
//! The classes are plain JavaScript (`lib/errors.js`: `FenceLockError` and one
//! subclass per kind); the JavaScript layer hands this module a factory at
//! load time (`init`), and every core error is built through it with its
//! kind, message, resource and per-node outcomes.

use std::ptr;

use napi::bindgen_prelude::ToNapiValue;
use napi::{Env, Status, sys};

use fencelock::Error;

use crate::bridge;

/// The JavaScript error for a core error: `factory(kind, message, resource,
/// nodes)` where `nodes` is `[[node, outcome, detail], …]`. Falls back to a
/// plain `Error` with `code` when no factory is installed.
pub(crate) fn to_js(env: sys::napi_env, err: &Error) -> sys::napi_value {
    let factory = bridge::state(env).ok().and_then(|state| state.error_factory());
    let Some(factory) = factory else {
        return plain(env, &err.to_string());
    };
    let nodes: Vec<Vec<String>> = err
        .nodes()
        .iter()
        .map(|report| {
            vec![
                report.node.clone(),
                report.outcome.name().to_owned(),
                report.outcome.to_string(),
            ]
        })
        .collect();
    // SAFETY: on the JavaScript thread of `env`, with values of that environment.
    unsafe {
        let args = [
            String::to_napi_value(env, err.kind().as_str().to_owned()),
            String::to_napi_value(env, err.message().to_owned()),
            Option::<String>::to_napi_value(env, err.resource().map(str::to_owned)),
            Vec::<Vec<String>>::to_napi_value(env, nodes),
        ];
        let [Ok(kind), Ok(message), Ok(resource), Ok(nodes)] = args else {
            return plain(env, &err.to_string());
        };
        let mut undefined = ptr::null_mut();
        sys::napi_get_undefined(env, &mut undefined);
        let mut result = ptr::null_mut();
        let argv = [kind, message, resource, nodes];
        let status = sys::napi_call_function(env, undefined, factory, argv.len(), argv.as_ptr(), &mut result);
        if status != sys::Status::napi_ok || result.is_null() {
            let mut pending = false;
            sys::napi_is_exception_pending(env, &mut pending);
            if pending {
                let mut ignored = ptr::null_mut();
                sys::napi_get_and_clear_last_exception(env, &mut ignored);
            }
            return plain(env, &err.to_string());
        }
        result
    }
}

/// A plain JavaScript `Error` with `message`.
pub(crate) fn plain(env: sys::napi_env, message: &str) -> sys::napi_value {
    // SAFETY: on the JavaScript thread of `env`.
    unsafe {
        let mut text = ptr::null_mut();
        sys::napi_create_string_utf8(env, message.as_ptr().cast(), message.len() as isize, &mut text);
        let mut error = ptr::null_mut();
        sys::napi_create_error(env, ptr::null_mut(), text, &mut error);
        error
    }
}

/// Throws the JavaScript error for `err` and returns the napi error that
/// tells napi-rs an exception is already pending.
pub(crate) fn throw(env: &Env, err: &Error) -> napi::Error {
    let value = to_js(env.raw(), err);
    // SAFETY: on the JavaScript thread of `env`, with a value of that environment.
    unsafe { sys::napi_throw(env.raw(), value) };
    napi::Error::new(Status::PendingException, err.to_string())
}

/// Hands an exception thrown by a callback to the JavaScript reporter (which
/// emits it as a warning); never lets it escape into Node's loop.
pub(crate) fn report_uncaught(env: sys::napi_env, error: sys::napi_value) {
    let Some(reporter) = bridge::state(env).ok().and_then(|state| state.reporter()) else {
        return;
    };
    // SAFETY: on the JavaScript thread of `env`.
    unsafe {
        let mut undefined = ptr::null_mut();
        sys::napi_get_undefined(env, &mut undefined);
        let mut ignored = ptr::null_mut();
        sys::napi_call_function(env, undefined, reporter, 1, &error, &mut ignored);
        let mut pending = false;
        sys::napi_is_exception_pending(env, &mut pending);
        if pending {
            sys::napi_get_and_clear_last_exception(env, &mut ignored);
        }
    }
}

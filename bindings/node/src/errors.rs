//! Core errors as instances of the JavaScript error classes.
//!
//! The classes are plain JavaScript (`lib/errors.js`: `FenceLockError` and one
//! subclass per kind); the JavaScript layer hands this module a factory at
//! load time (`init`), and every core error is built through it with its
//! kind, message, resource and per-node outcomes.
//!
//! This module keeps the factory and the reporter of callback exceptions
//! itself ([`install`]), one environment per JavaScript thread, so that it
//! depends on nothing else in the crate: the bridge calls into it, never the
//! other way round.

use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr;

use napi::bindgen_prelude::ToNapiValue;
use napi::{Env, Status, sys};

use fencelock::Error;

/// The JavaScript hooks of one Node environment.
struct Hooks {
    env: sys::napi_env,
    /// `(kind, message, resource, nodes) => Error`, from the JavaScript layer.
    factory: sys::napi_ref,
    /// `(error) => void`: where an exception thrown by a callback goes.
    reporter: sys::napi_ref,
}

thread_local! {
    /// One environment per JavaScript thread (Node runs each worker on its own thread).
    static HOOKS: RefCell<Option<Hooks>> = const { RefCell::new(None) };
}

/// Installs (or replaces) the error factory and the callback-exception
/// reporter of `env`.
pub(crate) fn install(
    env: sys::napi_env,
    factory: sys::napi_value,
    reporter: sys::napi_value,
) -> napi::Result<()> {
    let factory = reference(env, factory)?;
    let reporter = reference(env, reporter).inspect_err(|_| unreference(env, factory))?;
    let fresh = HOOKS.with(|hooks| hooks.borrow().as_ref().is_none_or(|hooks| hooks.env != env));
    if fresh {
        // Forget the hooks when the environment goes away, so that a later
        // environment of this thread never reads its dead references.
        // SAFETY: `env` is the live environment of this call; the hook is
        // added once per environment (Node refuses a duplicate).
        let status = unsafe { sys::napi_add_env_cleanup_hook(env, Some(forget_hooks), env.cast()) };
        if let Err(err) = check(status, "adding a cleanup hook") {
            unreference(env, factory);
            unreference(env, reporter);
            return Err(err);
        }
    }
    let old = HOOKS.with(|hooks| {
        hooks.borrow_mut().replace(Hooks {
            env,
            factory,
            reporter,
        })
    });
    if let Some(old) = old
        && old.env == env
    {
        unreference(env, old.factory);
        unreference(env, old.reporter);
    }
    Ok(())
}

fn reference(env: sys::napi_env, value: sys::napi_value) -> napi::Result<sys::napi_ref> {
    let mut reference = ptr::null_mut();
    // SAFETY: `value` is a live value of this environment.
    check(
        unsafe { sys::napi_create_reference(env, value, 1, &mut reference) },
        "referencing a hook",
    )?;
    Ok(reference)
}

fn unreference(env: sys::napi_env, reference: sys::napi_ref) {
    // SAFETY: a reference this module created, deleted once.
    unsafe { sys::napi_delete_reference(env, reference) };
}

/// The hook `pick` chooses, if installed in `env`.
fn hook(env: sys::napi_env, pick: fn(&Hooks) -> sys::napi_ref) -> Option<sys::napi_value> {
    let reference = HOOKS.with(|hooks| hooks.borrow().as_ref().filter(|hooks| hooks.env == env).map(pick))?;
    let mut value = ptr::null_mut();
    // SAFETY: a live reference of this environment.
    let status = unsafe { sys::napi_get_reference_value(env, reference, &mut value) };
    (status == sys::Status::napi_ok && !value.is_null()).then_some(value)
}

/// The environment is being torn down: forget its hooks without touching
/// napi (references die with the environment).
unsafe extern "C" fn forget_hooks(data: *mut c_void) {
    let env: sys::napi_env = data.cast();
    let _ = HOOKS.try_with(|hooks| {
        if let Ok(mut slot) = hooks.try_borrow_mut()
            && slot.as_ref().is_some_and(|hooks| hooks.env == env)
        {
            *slot = None;
        }
    });
}

/// `Ok` for `napi_ok`, else an error saying `what` failed.
pub(crate) fn check(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(
            Status::GenericFailure,
            format!("fencelock: {what} failed (napi status {status})"),
        ))
    }
}

/// The JavaScript error for a core error: `factory(kind, message, resource,
/// nodes)` where `nodes` is `[[node, outcome, detail], …]`. Falls back to a
/// plain `Error` with `code` when no factory is installed.
pub(crate) fn to_js(env: sys::napi_env, err: &Error) -> sys::napi_value {
    let Some(factory) = hook(env, |hooks| hooks.factory) else {
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
    let Some(reporter) = hook(env, |hooks| hooks.reporter) else {
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

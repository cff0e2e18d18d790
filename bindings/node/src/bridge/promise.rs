//! Promises: an operation's future run on the core's runtime, its result
//! settled on the JavaScript thread.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::ptr;

use futures_util::FutureExt;
use napi::bindgen_prelude::{FromNapiValue, PromiseRaw};
use napi::sys;

use super::state::EnvState;
use crate::errors::{self, check};

impl EnvState {
    /// Runs `future` on the core's runtime and returns a promise settled
    /// with its result: `Ok` through `convert` (on the JavaScript thread),
    /// a core error as the JavaScript error class of its kind. A panic in
    /// the future rejects the promise instead of leaving it pending.
    pub(crate) fn promise<'env, T, V, F, C>(&self, future: F, convert: C) -> napi::Result<PromiseRaw<'env, T>>
    where
        F: Future<Output = fencelock::Result<V>> + Send + 'static,
        V: Send + 'static,
        C: FnOnce(sys::napi_env, V) -> napi::Result<sys::napi_value> + Send + 'static,
    {
        let mut deferred = ptr::null_mut();
        let mut promise = ptr::null_mut();
        // SAFETY: the live environment of this call.
        check(
            unsafe { sys::napi_create_promise(self.env, &mut deferred, &mut promise) },
            "creating a promise",
        )?;
        let deferred = Deferred(deferred);
        let sender = self.sender.clone();
        self.begin();
        // Combinators, not an async block: the operation's future is then
        // polled where it was built, never moved into a block's state.
        let task = AssertUnwindSafe(future).catch_unwind().map(move |result| {
            let result = result.unwrap_or_else(|_| Err(internal_panic()));
            sender.send(Box::new(move |env| deferred.settle(env, result, convert)), true);
        });
        self.outbox.submit(&self.runtime, Box::pin(task));
        // SAFETY: a promise value of this environment.
        unsafe { PromiseRaw::from_napi_value(self.env, promise) }
    }
}

/// A raw promise resolver, only ever used on its environment's thread.
struct Deferred(sys::napi_deferred);

// SAFETY: the pointer crosses threads untouched and is used (once) only on
// the JavaScript thread, in `settle`.
unsafe impl Send for Deferred {}

impl Deferred {
    fn settle<V, C>(self, env: sys::napi_env, result: fencelock::Result<V>, convert: C)
    where
        C: FnOnce(sys::napi_env, V) -> napi::Result<sys::napi_value>,
    {
        let (ok, value) = match result
            .map_err(Outcome::Core)
            .and_then(|v| convert(env, v).map_err(Outcome::Napi))
        {
            Ok(value) => (true, value),
            Err(Outcome::Core(err)) => (false, errors::to_js(env, &err)),
            Err(Outcome::Napi(err)) => (false, errors::plain(env, &err.reason)),
        };
        // SAFETY: the deferred of this environment, settled exactly once.
        unsafe {
            if ok {
                sys::napi_resolve_deferred(env, self.0, value);
            } else {
                sys::napi_reject_deferred(env, self.0, value);
            }
        }
    }
}

enum Outcome {
    Core(fencelock::Error),
    Napi(napi::Error),
}

fn internal_panic() -> fencelock::Error {
    fencelock::Error::panicked("an internal fencelock task")
}

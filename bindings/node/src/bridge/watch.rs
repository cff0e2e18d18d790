//! Lost-lock watchers: a callback called on the JavaScript thread when a
//! lock's loss future resolves.

use std::future::Future;
use std::ptr;

use napi::bindgen_prelude::ToNapiValue;
use napi::sys;

use super::state::{EnvState, state};
use crate::errors::check;

impl EnvState {
    /// Spawns a watcher: when `lost` resolves, `callback` is called on the
    /// JavaScript thread with the loss reason. The watcher does not keep the
    /// event loop alive. Returns its id for [`EnvState::unwatch`] and the
    /// task to abort when the lock is released or collected.
    pub(crate) fn watch<F>(
        &self,
        callback: sys::napi_value,
        lost: F,
    ) -> napi::Result<(u64, tokio::task::AbortHandle)>
    where
        F: Future<Output = String> + Send + 'static,
    {
        let mut reference = ptr::null_mut();
        // SAFETY: `callback` is a live value of this environment.
        check(
            unsafe { sys::napi_create_reference(self.env, callback, 1, &mut reference) },
            "referencing the callback",
        )?;
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.callbacks.borrow_mut().insert(id, reference);
        let sender = self.sender.clone();
        let task = self.runtime.spawn(async move {
            let reason = lost.await;
            sender.send(Box::new(move |env| fire(env, id, &reason)), false);
        });
        Ok((id, task.abort_handle()))
    }

    /// Forgets watcher `id`'s callback (after release, or when the lock is collected).
    pub(crate) fn unwatch(&self, id: u64) {
        if let Some(reference) = self.callbacks.borrow_mut().remove(&id) {
            // SAFETY: a reference this state created, deleted once (removed from the map).
            unsafe { sys::napi_delete_reference(self.env, reference) };
        }
    }
}

/// Calls watcher `id`'s callback with `reason`, once.
fn fire(env: sys::napi_env, id: u64, reason: &str) {
    let Ok(state) = state(env) else { return };
    let Some(reference) = state.callbacks.borrow_mut().remove(&id) else {
        return; // released or collected meanwhile
    };
    let mut callback = ptr::null_mut();
    // SAFETY: a live reference of this environment; deleted right after use.
    unsafe {
        sys::napi_get_reference_value(env, reference, &mut callback);
        sys::napi_delete_reference(env, reference);
    }
    if callback.is_null() {
        return;
    }
    // SAFETY: the live environment on its JavaScript thread.
    unsafe {
        let Ok(arg) = String::to_napi_value(env, reason.to_owned()) else {
            return;
        };
        let mut undefined = ptr::null_mut();
        sys::napi_get_undefined(env, &mut undefined);
        let mut ignored = ptr::null_mut();
        sys::napi_call_function(env, undefined, callback, 1, &arg, &mut ignored);
    }
}

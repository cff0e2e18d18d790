//! JavaScript values the addon resolves promises with.

use napi::sys;

/// JavaScript `undefined`.
pub(crate) fn undefined(env: sys::napi_env) -> napi::Result<sys::napi_value> {
    let mut value = std::ptr::null_mut();
    // SAFETY: on the JavaScript thread of `env`.
    unsafe { sys::napi_get_undefined(env, &mut value) };
    Ok(value)
}

/// JavaScript `null`.
pub(crate) fn null(env: sys::napi_env) -> napi::Result<sys::napi_value> {
    let mut value = std::ptr::null_mut();
    // SAFETY: on the JavaScript thread of `env`.
    unsafe { sys::napi_get_null(env, &mut value) };
    Ok(value)
}

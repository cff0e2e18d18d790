//! The library's version, for checking the header against the library.

use std::ffi::c_char;

/// The library's version as `"MAJOR.MINOR.PATCH"`; compare with the
/// header's `FENCELOCK_VERSION` to catch a header/library mismatch.
///
/// Ownership: static; never free it. Never blocks; thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn fencelock_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

//! The C ABI shim with hostile arguments, as a C caller could pass them:
//! options from raw bytes (prefix, credentials, CA and client-certificate
//! PEM, timeouts, a drift factor from any f64 bit pattern, any TLS minimum
//! version), a client on a loopback port nobody listens on, and a resource
//! of raw bytes (invalid UTF-8 included). Every call returns a documented status, never
//! `FENCELOCK_STATUS_INTERNAL` (a caught panic), and the sanitizer sees no
//! memory error; the password never shows in an error message.
//!
//! The ffi crate builds no `rlib` (it would collide with the core's
//! `libfencelock.rlib`), so this target compiles the shim's modules itself:
//! the list below must follow `ffi/src/lib.rs`.
#![no_main]
#![allow(non_camel_case_types, dead_code, unused_imports)]

// The shim names the core `fencelock`.
extern crate fencelock as fencelock;

#[path = "../../../../ffi/src/args.rs"]
mod args;
#[path = "../../../../ffi/src/boundary.rs"]
mod boundary;
#[path = "../../../../ffi/src/client.rs"]
mod client;
#[path = "../../../../ffi/src/error.rs"]
mod error;
#[path = "../../../../ffi/src/events.rs"]
mod events;
#[path = "../../../../ffi/src/fenced.rs"]
mod fenced;
#[path = "../../../../ffi/src/lock.rs"]
mod lock;
#[path = "../../../../ffi/src/operation.rs"]
mod operation;
#[path = "../../../../ffi/src/options.rs"]
mod options;
#[path = "../../../../ffi/src/status.rs"]
mod status;
#[path = "../../../../ffi/src/version.rs"]
mod version;

use std::ffi::{CStr, CString, c_char};
use std::ptr;

use libfuzzer_sys::fuzz_target;

use client::*;
use error::*;
use lock::*;
use options::*;
use status::fencelock_status::{self, *};

/// A marker every fuzzed password starts with; no message may contain it.
const PASSWORD_MARK: &str = "pw-secret-";

/// Splits the input into fields at 0xFF bytes; a C string ends at its first NUL.
fn fields(data: &[u8]) -> Vec<CString> {
    data.split(|b| *b == 0xFF)
        .map(|field| {
            let visible = field.split(|b| *b == 0).next().unwrap_or_default();
            CString::new(visible).expect("no NUL left")
        })
        .collect()
}

fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    if let Some(bytes) = data.get(at..at + 8) {
        raw.copy_from_slice(bytes);
    }
    u64::from_le_bytes(raw)
}

fn allowed(status: fencelock_status, allowed: &[fencelock_status], what: &str) {
    assert_ne!(
        status, FENCELOCK_STATUS_INTERNAL,
        "{what}: a panic reached the boundary"
    );
    assert!(
        allowed.contains(&status),
        "{what}: undocumented status {status:?}"
    );
}

/// Checks and frees an error, if one was written.
fn check_error(error: *mut fencelock_error) {
    if error.is_null() {
        return;
    }
    // SAFETY: an error written by the library, freed once below.
    unsafe {
        let message = CStr::from_ptr(fencelock_error_message(error)).to_string_lossy();
        assert!(
            !message.contains(PASSWORD_MARK),
            "password in an error message: {message}"
        );
        fencelock_error_free(error);
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 25 {
        return;
    }
    let flags = data[0];
    let (node_timeout, ttl, drift) = (
        u64_at(data, 1) % 50,
        u64_at(data, 9),
        f64::from_bits(u64_at(data, 17)),
    );
    let f = fields(&data[25..]);
    let field = |i: usize| f.get(i).map_or(ptr::null(), |s| s.as_ptr());
    let password = CString::new(format!(
        "{PASSWORD_MARK}{}",
        f.get(2).map_or("", |s| s.to_str().unwrap_or("x"))
    ))
    .unwrap();

    // SAFETY: every pointer is NULL or a live NUL-terminated string / buffer of
    // the stated length, as the header requires; each object is freed once.
    unsafe {
        let mut options = ptr::null_mut();
        assert_eq!(fencelock_options_new(&mut options), FENCELOCK_STATUS_OK);
        let setters = [
            FENCELOCK_STATUS_OK,
            FENCELOCK_STATUS_INVALID_UTF8,
            FENCELOCK_STATUS_NULL_ARGUMENT,
        ];
        allowed(
            fencelock_options_set_key_prefix(options, field(0)),
            &setters,
            "key prefix",
        );
        allowed(
            fencelock_options_set_node_timeout_ms(options, node_timeout),
            &setters,
            "node timeout",
        );
        allowed(
            fencelock_options_set_connect_timeout_ms(options, node_timeout),
            &setters,
            "connect timeout",
        );
        allowed(
            fencelock_options_set_drift_factor(options, drift),
            &setters,
            "drift",
        );
        // Any int32: 12 and 13 are the defined versions, the rest is refused.
        let version = i32::from_le_bytes([data[5], data[6], data[7], data[8]]);
        let status = fencelock_options_set_tls_min_version(options, version);
        let expected = if matches!(version, 12 | 13) {
            FENCELOCK_STATUS_OK
        } else {
            FENCELOCK_STATUS_INVALID_ARGUMENT
        };
        assert_eq!(status, expected, "tls min version {version}");
        allowed(
            fencelock_options_set_retry_ms(options, ttl, node_timeout),
            &setters,
            "retry",
        );
        let user = if flags & 2 != 0 { field(1) } else { ptr::null() };
        allowed(
            fencelock_options_set_credentials(options, user, password.as_ptr()),
            &setters,
            "credentials",
        );
        if flags & 4 != 0 {
            let ca = f.get(3).map_or(&[][..], |s| s.as_bytes());
            allowed(
                fencelock_options_set_tls_ca_pem(options, ca.as_ptr(), ca.len()),
                &setters,
                "ca",
            );
        }
        if flags & 8 != 0 {
            let (cert, key) = (
                f.get(4).map_or(&[][..], |s| s.as_bytes()),
                f.get(5).map_or(&[][..], |s| s.as_bytes()),
            );
            allowed(
                fencelock_options_set_tls_client_cert_pem(
                    options,
                    cert.as_ptr(),
                    cert.len(),
                    key.as_ptr(),
                    key.len(),
                ),
                &setters,
                "client certificate",
            );
        }

        // Port 1 on loopback: nobody listens, so every request is refused at once.
        let scheme = if flags & 1 != 0 { "rediss" } else { "redis" };
        let url = CString::new(format!("{scheme}://127.0.0.1:1")).unwrap();
        let urls: Vec<*const c_char> = vec![url.as_ptr(); 1 + usize::from(flags >> 4 & 3)];
        let mut client = ptr::null_mut();
        let mut error = ptr::null_mut();
        let status = fencelock_client_new(urls.as_ptr(), urls.len(), options, &mut client, &mut error);
        allowed(
            status,
            &[
                FENCELOCK_STATUS_OK,
                FENCELOCK_STATUS_CONFIG,
                FENCELOCK_STATUS_TLS,
                FENCELOCK_STATUS_AUTH,
            ],
            "client",
        );
        check_error(error);
        fencelock_options_free(options);
        if status != FENCELOCK_STATUS_OK {
            assert!(client.is_null(), "out-parameter written on failure");
            return;
        }

        let mut lock = ptr::null_mut();
        let mut error = ptr::null_mut();
        let status = fencelock_try_acquire(client, field(6), ttl, &mut lock, &mut error);
        allowed(
            status,
            &[
                FENCELOCK_STATUS_INVALID_ARGUMENT,
                FENCELOCK_STATUS_INVALID_UTF8,
                FENCELOCK_STATUS_NULL_ARGUMENT,
                FENCELOCK_STATUS_UNAVAILABLE,
                FENCELOCK_STATUS_TLS,
            ],
            "try_acquire",
        );
        assert!(
            lock.is_null(),
            "no lock can be granted by a node that is not there"
        );
        check_error(error);
        fencelock_client_free(client);
    }
    let name = status::fencelock_status_name(i32::from_le_bytes([data[1], data[2], data[3], data[4]]));
    assert!(!name.is_null());
});

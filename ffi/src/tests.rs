//! Unit tests of the boundary itself; the C API end to end is tested from C
//! in `tests/c/` against real Redis nodes.

use std::ffi::CStr;
use std::ptr;

use fencelock::{Error, ErrorKind, LossReason};

use crate::boundary::{Failure, boundary};
use crate::error::{
    OUTCOME_PREFIX, c_string, fencelock_error, fencelock_error_free, fencelock_error_message,
    fencelock_error_status, fencelock_node_outcome,
};
use crate::log::fencelock_log_level;
use crate::loss_reason::{LOSS_PREFIX, fencelock_loss_reason};
use crate::options::{
    fencelock_options_free, fencelock_options_new, fencelock_options_set_key_prefix,
    fencelock_options_set_tls_min_version, fencelock_tls_version,
};
use crate::status::{fencelock_status, fencelock_status_name};

#[test]
fn a_panic_becomes_internal_with_detail() {
    let mut error: *mut fencelock_error = ptr::null_mut();
    // SAFETY: `error` is a valid out-pointer.
    let status = unsafe { boundary(&mut error, || panic!("boom")) };
    assert_eq!(status, fencelock_status::FENCELOCK_STATUS_INTERNAL);
    // SAFETY: `error` was just written by the boundary.
    unsafe {
        assert_eq!(
            fencelock_error_status(error),
            fencelock_status::FENCELOCK_STATUS_INTERNAL
        );
        let message = CStr::from_ptr(fencelock_error_message(error)).to_str().unwrap();
        assert!(message.contains("boom") && message.contains("bug"), "{message}");
        fencelock_error_free(error);
    }
}

#[test]
fn success_leaves_the_error_pointer_alone() {
    let sentinel = ptr::dangling_mut::<fencelock_error>();
    let mut error = sentinel;
    // SAFETY: `error` is a valid out-pointer.
    let status = unsafe { boundary(&mut error, || Ok(())) };
    assert_eq!(status, fencelock_status::FENCELOCK_STATUS_OK);
    assert_eq!(error, sentinel);
}

/// tests/vectors/protocol.json, the tables every front shares.
pub(crate) fn vectors() -> serde_json::Value {
    serde_json::from_str(include_str!("../../tests/vectors/protocol.json")).expect("valid JSON")
}

/// `(name, value)` of every entry of vectors list `list`, from fields `name_field` and `value_field`.
fn listed(list: &str, name_field: &str, value_field: &str) -> Vec<(String, i64)> {
    vectors()[list]
        .as_array()
        .unwrap_or_else(|| panic!("no list {list}"))
        .iter()
        .map(|entry| {
            (
                entry[name_field].as_str().unwrap().to_owned(),
                entry[value_field].as_i64().unwrap(),
            )
        })
        .collect()
}

/// `(name, value)` of every variant of C enum `E`.
fn c_enum<E>() -> Vec<(String, i64)>
where
    E: strum::VariantArray + Copy + Into<&'static str> + Into<i64>,
{
    E::VARIANTS
        .iter()
        .map(|variant| {
            let name: &'static str = (*variant).into();
            (name.to_owned(), (*variant).into())
        })
        .collect()
}

impl From<fencelock_status> for i64 {
    fn from(status: fencelock_status) -> i64 {
        status as i64
    }
}
impl From<fencelock_loss_reason> for i64 {
    fn from(reason: fencelock_loss_reason) -> i64 {
        reason as i64
    }
}
impl From<fencelock_log_level> for i64 {
    fn from(level: fencelock_log_level) -> i64 {
        level as i64
    }
}
impl From<fencelock_node_outcome> for i64 {
    fn from(outcome: fencelock_node_outcome) -> i64 {
        outcome as i64
    }
}

#[test]
fn every_core_error_kind_has_its_status() {
    let statuses = c_enum::<fencelock_status>();
    for (name, code) in listed("error_kinds", "c_status", "code") {
        assert!(
            statuses.contains(&(name.clone(), code)),
            "{name} = {code} is not a fencelock_status"
        );
    }
    for kind in ErrorKind::ALL {
        let status = fencelock_status::from(*kind);
        assert_eq!(status as i32, kind.code(), "{kind} has no status of its own");
        // SAFETY: a static string.
        let name = unsafe { CStr::from_ptr(fencelock_status_name(status as i32)) };
        assert_eq!(
            name.to_str().unwrap(),
            format!("FENCELOCK_STATUS_{}", kind.as_str().to_uppercase())
        );
    }
    // SAFETY: a static string.
    let unknown = unsafe { CStr::from_ptr(fencelock_status_name(-7)) };
    assert_eq!(unknown, c"FENCELOCK_STATUS_UNKNOWN");
}

#[test]
fn loss_reasons_log_levels_and_node_outcomes_are_the_vectors() {
    let with_prefix = |prefix: &str, list: Vec<(String, i64)>| -> Vec<(String, i64)> {
        list.into_iter()
            .map(|(name, value)| (format!("{prefix}{}", name.to_uppercase()), value))
            .collect()
    };
    let mut reasons = c_enum::<fencelock_loss_reason>();
    assert_eq!(reasons.pop(), Some(("FENCELOCK_LOSS_OTHER".to_owned(), 99)));
    assert_eq!(
        reasons,
        with_prefix(LOSS_PREFIX, listed("loss_reasons", "name", "c_value"))
    );
    assert_eq!(
        c_enum::<fencelock_node_outcome>(),
        with_prefix(OUTCOME_PREFIX, listed("node_outcomes", "name", "c_value"))
    );
    let mut levels = c_enum::<fencelock_log_level>();
    assert_eq!(levels.remove(0), ("FENCELOCK_LOG_OFF".to_owned(), 0));
    assert_eq!(
        levels,
        with_prefix("FENCELOCK_LOG_", listed("log_levels", "name", "c_value"))
    );
    for level in fencelock::LogLevel::ALL {
        assert_eq!(fencelock_log_level::from(level) as u8, level.number(), "{level}");
    }
    for reason in LossReason::ALL {
        assert_ne!(
            fencelock_loss_reason::from(*reason),
            fencelock_loss_reason::FENCELOCK_LOSS_OTHER,
            "{reason:?}"
        );
    }
}

#[test]
fn core_errors_keep_their_kind_and_node_detail_in_the_message() {
    let failure = Failure::from(Error::new(ErrorKind::Unavailable, "only 1 of 3 nodes answered"));
    assert_eq!(failure.status, fencelock_status::FENCELOCK_STATUS_UNAVAILABLE);
    assert!(failure.message.contains("only 1 of 3"));
}

#[test]
fn interior_nul_does_not_cut_a_message_short() {
    let text = c_string("before\0after".to_owned());
    assert_eq!(text.to_str().unwrap(), "before\u{FFFD}after");
}

#[test]
fn a_refused_setter_argument_leaves_the_options_as_they_were() {
    use fencelock_status::*;
    let mut options = ptr::null_mut();
    // SAFETY: `options` is a valid out-pointer, then a live options object.
    unsafe {
        assert_eq!(fencelock_options_new(&mut options), FENCELOCK_STATUS_OK);
        assert_eq!(
            fencelock_options_set_key_prefix(options, c"kept:".as_ptr()),
            FENCELOCK_STATUS_OK
        );
        let v1_3 = fencelock_tls_version::FENCELOCK_TLS_VERSION_1_3 as i32;
        assert_eq!(
            fencelock_options_set_tls_min_version(options, v1_3),
            FENCELOCK_STATUS_OK
        );
        for bad in [11, 14, -1, 0, i32::MIN, i32::MAX] {
            assert_eq!(
                fencelock_options_set_tls_min_version(options, bad),
                FENCELOCK_STATUS_INVALID_ARGUMENT,
                "{bad}"
            );
        }
        assert_eq!(
            fencelock_options_set_key_prefix(options, c"\xff".as_ptr()),
            FENCELOCK_STATUS_INVALID_UTF8
        );
        assert_eq!(
            fencelock_options_set_tls_min_version(ptr::null_mut(), v1_3),
            FENCELOCK_STATUS_NULL_ARGUMENT
        );
        let settings = format!("{:?}", (*options).builder);
        assert!(
            settings.contains("\"kept:\"") && settings.contains("tls_min_version: V1_3"),
            "{settings}"
        );
        fencelock_options_free(options);
    }
}

#[test]
fn a_blocking_call_on_an_async_runtime_thread_would_block() {
    use crate::client::fencelock_client_new;
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let urls = [c"redis://127.0.0.1:1".as_ptr()];
    let mut client = ptr::null_mut();
    // SAFETY: one valid URL, a valid out-pointer; no options, no error detail.
    let status = runtime.block_on(async {
        unsafe { fencelock_client_new(urls.as_ptr(), 1, ptr::null(), &mut client, ptr::null_mut()) }
    });
    assert_eq!(status, fencelock_status::FENCELOCK_STATUS_WOULD_BLOCK);
    assert!(client.is_null());
}

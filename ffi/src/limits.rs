//! The core's limits, as header macros for C code and as a struct for
//! bindings that cannot read macros (.NET calls `fencelock_get_limits`).
//!
//! cbindgen writes a macro only from a literal, so the macros repeat the
//! core's numbers; the unit tests compare them with the core and with
//! `tests/vectors/protocol.json` (`limits`).

use std::ffi::c_double;

/// Shortest ttl accepted, in ms.
pub const FENCELOCK_MIN_TTL_MS: u64 = 10;
/// Longest ttl accepted, in ms (`INT32_MAX`, what Redis's PEXPIRE takes).
pub const FENCELOCK_MAX_TTL_MS: u64 = 2_147_483_647;
/// Longest wait accepted, in ms (366 days).
pub const FENCELOCK_MAX_WAIT_MS: u64 = 31_622_400_000;
/// Longest resource name (and fenced key), in bytes of UTF-8.
pub const FENCELOCK_MAX_RESOURCE_BYTES: usize = 1024;
/// Longest key prefix, in bytes of UTF-8.
pub const FENCELOCK_MAX_PREFIX_BYTES: usize = 256;
/// Largest fencing token handed out (2^53 - 1: exact in a double).
pub const FENCELOCK_MAX_FENCING_TOKEN: u64 = 9_007_199_254_740_991;
/// Largest holder id of a fence (`INT64_MAX`: fits a signed SQL column).
pub const FENCELOCK_MAX_HOLDER_ID: u64 = 9_223_372_036_854_775_807;
/// Largest clock-drift factor a client accepts.
pub const FENCELOCK_MAX_DRIFT_FACTOR: c_double = 0.1;
/// Longest value a leader may announce (`fencelock_campaign`), in bytes.
pub const FENCELOCK_MAX_LEADER_VALUE_BYTES: usize = 65_536;
/// Most permits a semaphore may have (`fencelock_semaphore_acquire`).
pub const FENCELOCK_MAX_PERMITS: u32 = 256;

/// The limits of this library, read at run time (the same values as the
/// `FENCELOCK_MAX_*` and `FENCELOCK_MIN_TTL_MS` macros of the header it was
/// built with).
#[repr(C)]
#[derive(Debug, PartialEq)]
pub struct fencelock_limits {
    /// Shortest ttl accepted, in ms.
    pub min_ttl_ms: u64,
    /// Longest ttl accepted, in ms.
    pub max_ttl_ms: u64,
    /// Longest wait accepted, in ms.
    pub max_wait_ms: u64,
    /// Longest resource name (and fenced key), in bytes.
    pub max_resource_bytes: usize,
    /// Longest key prefix, in bytes.
    pub max_prefix_bytes: usize,
    /// Largest fencing token handed out.
    pub max_fencing_token: u64,
    /// Largest holder id of a fence.
    pub max_holder_id: u64,
    /// Largest clock-drift factor a client accepts.
    pub max_drift_factor: c_double,
    /// Longest value a leader may announce, in bytes.
    pub max_leader_value_bytes: usize,
    /// Most permits a semaphore may have.
    pub max_permits: u32,
}

static LIMITS: fencelock_limits = fencelock_limits {
    min_ttl_ms: fencelock::MIN_TTL.as_millis() as u64,
    max_ttl_ms: fencelock::MAX_TTL.as_millis() as u64,
    max_wait_ms: fencelock::MAX_WAIT.as_millis() as u64,
    max_resource_bytes: fencelock::MAX_RESOURCE_LEN,
    max_prefix_bytes: fencelock::MAX_PREFIX_LEN,
    max_fencing_token: fencelock::MAX_FENCING_TOKEN,
    max_holder_id: fencelock::MAX_HOLDER_ID,
    max_drift_factor: fencelock::MAX_DRIFT_FACTOR,
    max_leader_value_bytes: fencelock::MAX_LEADER_VALUE,
    max_permits: fencelock::MAX_PERMITS,
};

/// The limits of the loaded library.
///
/// Ownership: the struct is static; never free or modify it. Never NULL.
/// Never blocks; thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn fencelock_get_limits() -> *const fencelock_limits {
    &LIMITS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_macros_are_the_core_limits_and_the_vectors() {
        let macros = fencelock_limits {
            min_ttl_ms: FENCELOCK_MIN_TTL_MS,
            max_ttl_ms: FENCELOCK_MAX_TTL_MS,
            max_wait_ms: FENCELOCK_MAX_WAIT_MS,
            max_resource_bytes: FENCELOCK_MAX_RESOURCE_BYTES,
            max_prefix_bytes: FENCELOCK_MAX_PREFIX_BYTES,
            max_fencing_token: FENCELOCK_MAX_FENCING_TOKEN,
            max_holder_id: FENCELOCK_MAX_HOLDER_ID,
            max_drift_factor: FENCELOCK_MAX_DRIFT_FACTOR,
            max_leader_value_bytes: FENCELOCK_MAX_LEADER_VALUE_BYTES,
            max_permits: FENCELOCK_MAX_PERMITS,
        };
        // SAFETY: never NULL, static.
        let limits = unsafe { &*fencelock_get_limits() };
        assert_eq!(&macros, limits);
        let vectors = crate::tests::vectors();
        let listed = &vectors["limits"];
        let number = |name: &str| listed[name].as_u64().unwrap_or_else(|| panic!("limits.{name}"));
        assert_eq!(
            fencelock_limits {
                min_ttl_ms: number("min_ttl_ms"),
                max_ttl_ms: number("max_ttl_ms"),
                max_wait_ms: number("max_wait_ms"),
                max_resource_bytes: number("max_resource_bytes") as usize,
                max_prefix_bytes: number("max_prefix_bytes") as usize,
                max_fencing_token: number("max_fencing_token"),
                max_holder_id: number("max_holder_id"),
                max_drift_factor: listed["max_drift_factor"].as_f64().unwrap(),
                max_leader_value_bytes: number("max_leader_value_bytes") as usize,
                max_permits: number("max_permits") as u32,
            },
            macros
        );
    }
}

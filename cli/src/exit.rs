//! The exit codes of `fencelock run`, as documented in `--help` and the README.

use std::process::ExitCode;

use fencelock::ErrorKind;

/// Bad arguments or configuration (clap uses the same code for usage errors).
pub const USAGE: u8 = 2;
/// Internal error (a bug).
pub const SOFTWARE: u8 = 70;
/// Redis unavailable, or refused our credentials or TLS.
pub const UNAVAILABLE: u8 = 69;
/// Another owner held the lock for all of `--wait`.
pub const NOT_ACQUIRED: u8 = 75;
/// The lock was lost while the command ran.
pub const LOST: u8 = 76;
/// The command exists but could not be executed.
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
pub const NOT_FOUND: u8 = 127;

/// The exit code after signal `signal` stopped the wait for the lock:
/// 128+N, as a shell reports a process that died of signal N.
pub fn for_signal(signal: nix::sys::signal::Signal) -> u8 {
    // INT, TERM, HUP and QUIT are 2, 15, 1 and 3: the sum always fits.
    128u8.saturating_add(signal as i32 as u8)
}

/// The exit code for a failure of kind `kind`.
pub fn for_error(kind: ErrorKind) -> ExitCode {
    ExitCode::from(code_for(kind))
}

/// The exit code for each kind, as `tests/vectors/protocol.json` lists it (`cli_exit`).
fn code_for(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::NotAcquired | ErrorKind::Timeout => NOT_ACQUIRED,
        ErrorKind::Lost => LOST,
        ErrorKind::InvalidArgument | ErrorKind::Config => USAGE,
        ErrorKind::Unavailable | ErrorKind::Auth | ErrorKind::Tls => UNAVAILABLE,
        _ => SOFTWARE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of the shared table exits as the vectors say; a kind the
    /// core adds must be listed there, with its exit code, to pass.
    #[test]
    fn exit_codes_are_the_vectors() {
        let vectors: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/vectors/protocol.json")).expect("valid JSON");
        let listed = vectors["error_kinds"].as_array().unwrap();
        assert_eq!(
            listed.len(),
            ErrorKind::ALL.len(),
            "every core kind is in the vectors"
        );
        for entry in listed {
            let name = entry["name"].as_str().unwrap();
            let kind = ErrorKind::from_name(name).unwrap_or_else(|| panic!("the core has no kind {name}"));
            assert_eq!(
                u64::from(code_for(kind)),
                entry["cli_exit"].as_u64().unwrap(),
                "{name}"
            );
        }
    }
}

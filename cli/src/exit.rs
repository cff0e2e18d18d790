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
    ExitCode::from(match kind {
        ErrorKind::NotAcquired | ErrorKind::Timeout => NOT_ACQUIRED,
        ErrorKind::Lost => LOST,
        ErrorKind::InvalidArgument | ErrorKind::Config => USAGE,
        ErrorKind::Unavailable | ErrorKind::Auth | ErrorKind::Tls => UNAVAILABLE,
        _ => SOFTWARE,
    })
}

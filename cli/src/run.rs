//! `fencelock run`: hold a lock for exactly as long as a command runs.

use std::process::ExitCode;

use fencelock::{Client, ErrorKind, Lock, LockOptions};

use crate::args::RunArgs;
use crate::child::{self, Child};
use crate::exit;
use crate::signals::Forwarded;

/// How the command ended.
enum Ending {
    Exited(u8),
    Lost,
}

/// Acquires, runs the command, releases; returns the documented exit code.
pub async fn run(client: &Client, args: &RunArgs) -> ExitCode {
    let options = LockOptions::new(args.ttl).wait(args.wait);
    let lock = match client.acquire(&args.resource, options).await {
        Ok(lock) => lock,
        Err(e) => {
            let hint = match e.kind() {
                ErrorKind::NotAcquired | ErrorKind::Timeout => {
                    "; another owner holds it (try a longer --wait)"
                }
                _ => "",
            };
            eprintln!("fencelock: {e}{hint}");
            return exit::for_error(e.kind());
        }
    };
    tracing::info!(resource = %args.resource, fencing_token = lock.fencing_token(), "lock acquired");
    let ending = supervise(&lock, args).await;
    release(&lock, &ending).await;
    match ending {
        Ok(Ending::Exited(code)) => ExitCode::from(code),
        Ok(Ending::Lost) => ExitCode::from(exit::LOST),
        Err(code) => ExitCode::from(code),
    }
}

/// Runs the command until it exits or the lock is lost, forwarding signals.
async fn supervise(lock: &Lock, args: &RunArgs) -> Result<Ending, u8> {
    // Caught before the command starts, so a signal in between is not lost.
    let mut signals = Forwarded::catch().map_err(|e| {
        eprintln!("fencelock: cannot catch signals: {e}");
        exit::SOFTWARE
    })?;
    let mut command: Child =
        child::spawn(&args.command, &args.resource, lock.fencing_token()).map_err(|e| {
            eprintln!("fencelock: {}", e.message);
            e.code
        })?;
    loop {
        tokio::select! {
            status = command.wait() => return status.map(|s| Ending::Exited(child::exit_code(s))).map_err(|e| {
                eprintln!("fencelock: lost track of the command: {e}");
                exit::SOFTWARE
            }),
            reason = lock.lost() => {
                eprintln!(
                    "fencelock: lost the lock '{}': {reason}; stopping the command (SIGTERM, SIGKILL after {:?})",
                    args.resource, args.grace
                );
                let _ = command.terminate(args.grace).await;
                return Ok(Ending::Lost);
            }
            signal = signals.next() => {
                tracing::info!(%signal, "forwarding signal to the command");
                command.signal(signal);
            }
        }
    }
}

async fn release(lock: &Lock, ending: &Result<Ending, u8>) {
    match lock.release().await {
        Ok(()) => tracing::info!("lock released"),
        // Already reported when the loss was noticed.
        Err(e) if e.kind() == ErrorKind::NotHeld && matches!(ending, Ok(Ending::Lost)) => {}
        Err(e) => eprintln!("fencelock: {e}"),
    }
}

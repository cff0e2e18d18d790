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
    // Caught before the lock is taken: a signal while waiting cancels the
    // wait (the attempt is undone) instead of killing fencelock with a grant
    // on its way, and one that comes before the command starts is forwarded
    // to it once it does.
    let mut signals = match Forwarded::catch() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("fencelock: cannot catch signals: {e}");
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    let options = LockOptions::new(args.ttl).wait(args.wait);
    let acquired = tokio::select! {
        acquired = client.acquire(&args.resource, options) => acquired,
        signal = signals.next() => {
            eprintln!(
                "fencelock: {signal} while waiting for the lock '{}'; the command was not run",
                args.resource
            );
            return ExitCode::from(exit::for_signal(signal));
        }
    };
    let lock = match acquired {
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
    let ending = supervise(&lock, args, &mut signals).await;
    release(&lock, &ending).await;
    match ending {
        Ok(Ending::Exited(code)) => ExitCode::from(code),
        Ok(Ending::Lost) => ExitCode::from(exit::LOST),
        Err(code) => ExitCode::from(code),
    }
}

/// Runs the command until it exits or the lock is lost, forwarding signals.
async fn supervise(lock: &Lock, args: &RunArgs, signals: &mut Forwarded) -> Result<Ending, u8> {
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

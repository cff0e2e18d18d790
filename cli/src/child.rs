//! The command `fencelock run` supervises, in a process group of its own so
//! that a signal reaches everything it started (a shell's children too).

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::args::CONNECTION_VARS;
use crate::exit;

/// A running command.
pub struct Child {
    process: tokio::process::Child,
    group: Pid,
}

/// Why the command could not start, with the exit code that reports it.
pub struct SpawnError {
    pub code: u8,
    pub message: String,
}

/// Starts `command` with the lock's resource and fencing token in its environment.
pub fn spawn(command: &[String], resource: &str, fencing_token: u64) -> Result<Child, SpawnError> {
    let (program, args) = command.split_first().expect("clap requires a command");
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env("FENCELOCK_RESOURCE", resource)
        .env("FENCELOCK_TOKEN", fencing_token.to_string())
        .process_group(0);
    for name in CONNECTION_VARS {
        command.env_remove(name);
    }
    let process = command.spawn().map_err(|e| SpawnError {
        code: if e.kind() == io::ErrorKind::NotFound {
            exit::NOT_FOUND
        } else {
            exit::CANNOT_EXECUTE
        },
        message: format!("cannot run {program:?}: {e}"),
    })?;
    let pid = process.id().expect("a just-spawned child has a pid");
    Ok(Child {
        process,
        group: Pid::from_raw(pid as i32),
    })
}

impl Child {
    /// Waits for the command to exit.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.process.wait().await
    }

    /// Sends `signal` to the command's process group.
    pub fn signal(&self, signal: Signal) {
        // ESRCH: the group is already gone, which is what we wanted.
        if let Err(e) = killpg(self.group, signal)
            && e != nix::errno::Errno::ESRCH
        {
            tracing::warn!(%signal, error = %e, "could not signal the command");
        }
    }

    /// SIGTERM to the group, then SIGKILL if the command has not exited after `grace`.
    pub async fn terminate(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        self.signal(Signal::SIGTERM);
        if let Ok(status) = tokio::time::timeout(grace, self.wait()).await {
            return status;
        }
        tracing::warn!(
            grace_ms = grace.as_millis() as u64,
            "the command ignored SIGTERM; sending SIGKILL"
        );
        self.signal(Signal::SIGKILL);
        self.wait().await
    }
}

/// The shell's convention: the exit code, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => 128u8.saturating_add(signal as u8),
        (None, None) => exit::SOFTWARE,
    }
}

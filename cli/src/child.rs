//! The command `fencelock run` supervises, in a process group of its own so
//! that a signal reaches everything it started (a shell's children too).

use std::io;
use std::os::fd::RawFd;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::args::CONNECTION_VARS;
use crate::exit;
use crate::terminal::{self, Terminal};

/// A running command.
pub struct Child {
    process: tokio::process::Child,
    /// Its process group, which its PID names.
    group: Pid,
}

/// Why the command could not start, with the exit code that reports it.
pub struct SpawnError {
    /// The exit code for it (126 or 127).
    pub code: u8,
    /// What to tell the user.
    pub message: String,
}

/// Starts `command` with the lock's resource, fencing token and fence
/// (`token:holder`) in its environment, and none of fencelock's connection
/// settings. With
/// `foreground`, the command's process group becomes the terminal's
/// foreground group before the command runs.
///
/// Must be called on fencelock's main thread: the command's death signal
/// fires when the thread that started it ends (see [`die_with_fencelock`]).
pub fn spawn(
    command: &[String],
    resource: &str,
    fence: fencelock::Fence,
    permit: Option<u32>,
    foreground: Option<&Terminal>,
) -> Result<Child, SpawnError> {
    let (program, args) = command.split_first().expect("clap requires a command");
    let mut builder = tokio::process::Command::new(program);
    builder
        .args(args)
        .env("FENCELOCK_RESOURCE", resource)
        .env("FENCELOCK_TOKEN", fence.token.to_string())
        .env("FENCELOCK_FENCE", fence.to_string())
        .process_group(0);
    if let Some(permit) = permit {
        builder.env("FENCELOCK_PERMIT", permit.to_string());
    }
    for name in CONNECTION_VARS {
        builder.env_remove(name);
    }
    let fencelock = nix::unistd::getpid();
    // SAFETY: gettid has no preconditions.
    #[cfg(target_os = "linux")]
    debug_assert_eq!(
        unsafe { libc::gettid() },
        fencelock.as_raw(),
        "the command must be started on the main thread: its death signal follows the starting thread"
    );
    let tty = foreground.map(Terminal::raw_fd);
    // SAFETY: `before_exec` makes only async-signal-safe system calls.
    unsafe { builder.pre_exec(move || before_exec(fencelock, tty)) };
    let process = builder.spawn().map_err(|e| SpawnError {
        code: if e.kind() == io::ErrorKind::NotFound {
            exit::NOT_FOUND
        } else {
            exit::CANNOT_EXECUTE
        },
        message: format!("cannot run {program:?}: {e}"),
    })?;
    let pid = process.id().expect("a just-spawned child has a pid");
    let group = Pid::from_raw(pid as i32);
    if let Some(terminal) = foreground {
        // Also from this side, as shells do: whichever runs first, the
        // hand-over is done before either goes on.
        terminal.give_to(group);
    }
    Ok(Child { process, group })
}

/// Runs in the command's process between fork and exec (after it moved to
/// its own process group): only async-signal-safe calls.
fn before_exec(fencelock: Pid, tty: Option<RawFd>) -> io::Result<()> {
    if let Some(tty) = tty {
        // Before exec, so the command never starts in the background of a
        // terminal it may read (it would be stopped by SIGTTIN). A failure
        // leaves it in the background, where it still runs.
        let _ = terminal::set_foreground(tty, nix::unistd::getpid());
    }
    die_with_fencelock(fencelock)
}

/// Asks the kernel to SIGKILL the command when fencelock dies, however it
/// dies (SIGKILL included, which fencelock cannot catch): a command left
/// running would run unlocked once the lease expires.
///
/// Linux only (`PR_SET_PDEATHSIG`). It fires when the *thread* that forked
/// the command ends, which is fencelock's main thread (see [`spawn`]). It
/// reaches the command's first process, not the processes that one started
/// (a script should `exec` its last command), and the kernel clears it when
/// the command executes a set-user-ID or set-group-ID program. Elsewhere a
/// command outlives a killed fencelock.
#[cfg(target_os = "linux")]
fn die_with_fencelock(fencelock: Pid) -> io::Result<()> {
    // SAFETY: prctl and getppid are async-signal-safe system calls.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(io::Error::last_os_error());
        }
        // fencelock may have died between fork and prctl: the command was
        // then already handed to another parent and no signal will come.
        if libc::getppid() != fencelock.as_raw() {
            return Err(io::Error::other("fencelock exited before the command started"));
        }
    }
    Ok(())
}

/// No death signal outside Linux: see the Linux version.
#[cfg(not(target_os = "linux"))]
fn die_with_fencelock(_fencelock: Pid) -> io::Result<()> {
    Ok(())
}

impl Child {
    /// Waits for the command to exit.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.process.wait().await
    }

    /// The command's process group.
    pub fn group(&self) -> Pid {
        self.group
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

    /// The signal that stopped the command, if it stopped since the last
    /// call (each stop is reported once). Exits are left for [`Child::wait`].
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    pub fn stopped(&self) -> Option<Signal> {
        use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
        // WSTOPPED without WEXITED: never reaps the command.
        match waitid(Id::Pid(self.group), WaitPidFlag::WSTOPPED | WaitPidFlag::WNOHANG) {
            Ok(WaitStatus::Stopped(_, signal)) => Some(signal),
            _ => None,
        }
    }

    /// Stops are not followed where `waitid` is missing.
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    pub fn stopped(&self) -> Option<Signal> {
        None
    }

    /// SIGTERM to the group, then SIGKILL if the command has not exited after `grace`.
    pub async fn terminate(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        self.signal(Signal::SIGTERM);
        // A stopped command would only act on SIGTERM once continued.
        self.signal(Signal::SIGCONT);
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

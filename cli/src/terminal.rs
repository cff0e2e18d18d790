//! fencelock's controlling terminal, and handing its foreground to the command.
//!
//! A shell gives the terminal's foreground to the process group of the job
//! it runs: fencelock's. The command runs in a process group of its own (so
//! fencelock can signal everything it started), so fencelock passes the
//! foreground on to that group, as a shell does for its jobs. The command
//! can then read the terminal, and the keys that send signals (Ctrl-C,
//! Ctrl-\, Ctrl-Z) reach the command once, directly, and never fencelock,
//! which would forward them a second time.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::unistd::{Pid, getpgrp, tcgetpgrp, tcsetpgrp};

/// The controlling terminal, opened through /dev/tty whatever stdin is.
pub struct Terminal {
    tty: File,
}

impl Terminal {
    /// The controlling terminal, or `None` without one (cron, systemd, a
    /// daemon): then there is no foreground to manage.
    pub fn open() -> Option<Terminal> {
        OpenOptions::new()
            .read(true)
            .write(true)
            // Never make it our controlling terminal: we only look at the one we have.
            .custom_flags(libc::O_NOCTTY)
            .open("/dev/tty")
            .ok()
            .map(|tty| Terminal { tty })
    }

    /// Whether fencelock's process group is the terminal's foreground group
    /// (run in the foreground, not with `&` or after `bg`).
    pub fn fencelock_in_foreground(&self) -> bool {
        tcgetpgrp(self.tty.as_fd()).is_ok_and(|group| group == getpgrp())
    }

    /// Whether process group `group` is the terminal's foreground group.
    pub fn in_foreground(&self, group: Pid) -> bool {
        tcgetpgrp(self.tty.as_fd()).is_ok_and(|foreground| foreground == group)
    }

    /// Makes `group` the foreground process group.
    pub fn give_to(&self, group: Pid) {
        if let Err(e) = set_foreground(self.tty.as_raw_fd(), group) {
            // ESRCH/EPERM: the group is gone (the command exited meanwhile).
            tracing::debug!(error = %e, "could not hand over the terminal");
        }
    }

    /// Takes the foreground back from `group` if it still has it (the
    /// command stopped or ended), so that fencelock's own job is the
    /// foreground again for the shell.
    pub fn take_back_from(&self, group: Pid) {
        if self.in_foreground(group) {
            self.give_to(getpgrp());
        }
    }

    /// The descriptor, for the command's side of the hand-over before exec.
    pub fn raw_fd(&self) -> RawFd {
        self.tty.as_raw_fd()
    }
}

/// `tcsetpgrp` with SIGTTOU blocked in the calling thread: from a
/// background process group (fencelock after handing the terminal over, or
/// the command before it has it) the call would otherwise stop the caller.
/// Async-signal-safe, so the command can call it between fork and exec.
pub fn set_foreground(tty: RawFd, group: Pid) -> nix::Result<()> {
    let mut block = SigSet::empty();
    block.add(Signal::SIGTTOU);
    let mut previous = SigSet::empty();
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&block), Some(&mut previous))?;
    // SAFETY: the descriptor is open for the duration of the call (owned by
    // a `Terminal` in fencelock, inherited in the command before exec).
    let result = tcsetpgrp(unsafe { std::os::fd::BorrowedFd::borrow_raw(tty) }, group);
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&previous), None)?;
    result
}

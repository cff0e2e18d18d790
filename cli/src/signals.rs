//! The signals `fencelock run` catches instead of dying of them.

use nix::sys::signal::Signal;
use tokio::signal::unix::SignalKind;

/// Signals passed on to the command's process group.
const FORWARDED: [Signal; 6] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

/// What a caught signal asks of fencelock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Pass this signal on to the command (INT, TERM, HUP, QUIT, USR1, USR2).
    Forward(Signal),
    /// SIGTSTP reached fencelock itself: stop, with the command if it runs.
    Stop,
    /// SIGCONT: fencelock was resumed (`fg`, `bg`, `kill -CONT`).
    Continued,
    /// SIGCHLD: the command may have stopped (or exited).
    ChildChanged,
}

/// One caught signal's stream.
struct Caught {
    signal: Signal,
    stream: tokio::signal::unix::Signal,
}

/// The caught signals, from the moment [`Signals::catch`] returns.
pub struct Signals {
    forwarded: Vec<Caught>,
    /// None when SIGTSTP was ignored when fencelock started.
    stop: Option<tokio::signal::unix::Signal>,
    continued: tokio::signal::unix::Signal,
    child: tokio::signal::unix::Signal,
}

impl Signals {
    /// Starts catching. A signal that was ignored when fencelock started
    /// (`nohup`, a background job of a non-interactive shell) stays ignored,
    /// and so the command inherits it ignored, as it would without fencelock.
    pub fn catch() -> std::io::Result<Self> {
        let mut forwarded = Vec::new();
        for signal in FORWARDED {
            if !ignored(signal) {
                forwarded.push(Caught {
                    signal,
                    stream: catch(signal)?,
                });
            }
        }
        Ok(Signals {
            forwarded,
            stop: if ignored(Signal::SIGTSTP) {
                None
            } else {
                Some(catch(Signal::SIGTSTP)?)
            },
            continued: catch(Signal::SIGCONT)?,
            child: catch(Signal::SIGCHLD)?,
        })
    }

    /// The next event. Resumption and child changes come first, so a stop
    /// that follows a `fg` is never judged before the `fg` itself.
    pub async fn next(&mut self) -> Event {
        let forwarded = std::future::poll_fn(|cx| {
            for caught in &mut self.forwarded {
                if caught.stream.poll_recv(cx).is_ready() {
                    return std::task::Poll::Ready(caught.signal);
                }
            }
            std::task::Poll::Pending
        });
        let stop = async {
            match &mut self.stop {
                Some(stream) => stream.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = self.continued.recv() => Event::Continued,
            _ = self.child.recv() => Event::ChildChanged,
            _ = stop => Event::Stop,
            signal = forwarded => Event::Forward(signal),
        }
    }
}

fn catch(signal: Signal) -> std::io::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(SignalKind::from_raw(signal as i32))
}

/// Whether `signal`'s disposition is "ignore" (inherited from the parent).
fn ignored(signal: Signal) -> bool {
    // SAFETY: with a null new action, sigaction only reads the current one
    // into `current`, a zeroed plain C struct.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal as i32, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// Whether `signal` ends the wait for the lock (the others wait for the command).
pub fn cancels_waiting(signal: Signal) -> bool {
    matches!(
        signal,
        Signal::SIGINT | Signal::SIGTERM | Signal::SIGHUP | Signal::SIGQUIT
    )
}

/// Stops fencelock with `signal` (SIGTSTP, SIGTTIN, SIGTTOU or SIGSTOP) as
/// if it had not caught it, and returns once fencelock has been continued.
/// With `whole_group`, the rest of fencelock's process group stops too:
/// what the terminal would have done, had fencelock not handed the
/// foreground to the command.
pub fn stop_self(signal: Signal, whole_group: bool) {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, sigaction};
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // The default action is to stop; tokio's handler would only record it.
    // SAFETY: installs the default disposition, restored just below.
    let previous = (signal != Signal::SIGSTOP)
        .then(|| unsafe { sigaction(signal, &default) }.ok())
        .flatten();
    // Either way the signal is taken by this very thread before the call
    // returns: the process stops here, and what follows runs after SIGCONT.
    // (The kernel discards it if fencelock's process group is orphaned:
    // nobody could continue it. Then this returns at once.) One signal
    // only: a second one, still pending when SIGCONT comes, would stop
    // fencelock again right after.
    if whole_group {
        // A signal to a process goes to its main thread when that thread
        // does not block it; fencelock runs on its main thread.
        let _ = nix::sys::signal::killpg(nix::unistd::getpgrp(), signal);
    } else {
        let _ = nix::sys::pthread::pthread_kill(nix::sys::pthread::pthread_self(), signal);
    }
    if let Some(previous) = previous {
        // SAFETY: puts back the handler tokio installed.
        let _ = unsafe { sigaction(signal, &previous) };
    }
}

//! The signals `fencelock run` forwards to its command instead of dying of them.

use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};

/// INT, TERM and HUP, caught from the moment this is created.
pub struct Forwarded {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Forwarded {
    /// Starts catching the signals.
    pub fn catch() -> std::io::Result<Self> {
        Ok(Forwarded {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal received.
    pub async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.interrupt.recv() => Signal::SIGINT,
            _ = self.terminate.recv() => Signal::SIGTERM,
            _ = self.hangup.recv() => Signal::SIGHUP,
        }
    }
}

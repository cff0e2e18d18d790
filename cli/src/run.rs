//! `fencelock run`: hold a lock for exactly as long as a command runs.
//!
//! Job control: the command runs in a process group of its own, which gets
//! the terminal's foreground when fencelock has it (see [`crate::terminal`]).
//! When the command stops (Ctrl-Z, or reading the terminal from the
//! background), fencelock takes the terminal back and stops itself with the
//! same signal, so the shell sees its job stopped; renewals stop with it.
//! When fencelock is continued (`fg`, `bg`, SIGCONT), it checks that the
//! lock is still valid, gives the foreground back to the command if it has
//! it, and continues the command. Without a terminal (cron), fencelock
//! follows only the stops it asked for itself (a SIGTSTP it was sent): a
//! command stopped directly keeps its lock renewed, since fencelock cannot
//! know who would continue it.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use fencelock::{Client, ErrorKind, Lock, LockOptions};
use nix::sys::signal::Signal;

use crate::args::RunArgs;
use crate::child::{self, Child};
use crate::exit;
use crate::signals::{self, Event, Signals};
use crate::terminal::Terminal;

/// How the command ended.
enum Ending {
    Exited(u8),
    Lost,
}

/// What a command runs under: a lock (`run`) or a leadership (`elect`).
pub struct Hold<'a> {
    /// The resource, or the election's name.
    pub resource: &'a str,
    /// The command and its arguments.
    pub command: &'a [String],
    /// After a loss: how long the command has between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// "lock" or "leadership", for messages.
    pub what: &'static str,
    /// What to add to a `not_acquired` or `timeout` error.
    pub busy_hint: &'static str,
}

/// `fencelock run`: acquires, runs the command, releases; returns the documented exit code.
pub async fn run(client: &Client, args: &RunArgs) -> ExitCode {
    let options = LockOptions::new(args.ttl).wait(args.wait).fair(args.fair);
    let mut hold = Hold {
        resource: &args.resource,
        command: &args.command,
        grace: args.grace,
        what: "lock",
        busy_hint: "another owner holds it or a waiter is ahead in line (try a longer --wait)",
    };
    if args.read || args.write {
        let rw = match client.rw_lock(&args.resource) {
            Ok(rw) => rw,
            Err(e) => {
                eprintln!("fencelock: {e}");
                return exit::for_error(e.kind());
            }
        };
        hold.what = "read-write lock";
        if args.read {
            hold.busy_hint = "a writer holds it or waits ahead (try a longer --wait)";
            return run_holding(rw.read(options), &hold).await;
        }
        hold.busy_hint =
            "readers or another writer hold it, or a waiter is ahead in line (try a longer --wait)";
        return run_holding(rw.write(options), &hold).await;
    }
    let Some(permits) = args.permits else {
        return run_holding(client.acquire(&args.resource, options), &hold).await;
    };
    let semaphore = match client.semaphore(&args.resource, permits) {
        Ok(semaphore) => semaphore,
        Err(e) => {
            eprintln!("fencelock: {e}");
            return exit::for_error(e.kind());
        }
    };
    hold.what = "semaphore";
    hold.busy_hint = "every permit is held or kept for a waiter ahead in line (try a longer --wait)";
    run_holding(semaphore.acquire(options), &hold).await
}

/// Waits for `acquire`, runs the command while what it got is held,
/// releases it; returns the documented exit code.
pub async fn run_holding(
    acquire: impl Future<Output = fencelock::Result<Lock>>,
    hold: &Hold<'_>,
) -> ExitCode {
    // Caught before the lock is taken: a signal while waiting cancels the
    // wait (the attempt is undone) instead of killing fencelock with a grant
    // on its way, and one that comes before the command starts is forwarded
    // to it once it does.
    let mut signals = match Signals::catch() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("fencelock: cannot catch signals: {e}");
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    let mut early = Vec::new();
    let lock = match wait_for_lock(acquire, hold, &mut signals, &mut early).await {
        Ok(lock) => lock,
        Err(code) => return code,
    };
    tracing::info!(resource = %hold.resource, fencing_token = lock.fencing_token(), "{} acquired", hold.what);
    let terminal = Terminal::open();
    let ending = supervise(&lock, hold, &mut signals, terminal.as_ref(), &early).await;
    release(&lock, &ending).await;
    match ending {
        Ok(Ending::Exited(code)) => ExitCode::from(code),
        Ok(Ending::Lost) => ExitCode::from(exit::LOST),
        Err(code) => ExitCode::from(code),
    }
}

/// Acquires the lock. INT, TERM, HUP and QUIT cancel the wait; USR1 and
/// USR2 are kept in `early` for the command; SIGTSTP stops fencelock.
async fn wait_for_lock(
    acquire: impl Future<Output = fencelock::Result<Lock>>,
    hold: &Hold<'_>,
    signals: &mut Signals,
    early: &mut Vec<Signal>,
) -> Result<Lock, ExitCode> {
    tokio::pin!(acquire);
    let acquired = loop {
        tokio::select! {
            acquired = &mut acquire => break acquired,
            event = signals.next() => match event {
                Event::Forward(signal) if signals::cancels_waiting(signal) => {
                    eprintln!(
                        "fencelock: {signal} while waiting for the {} '{}'; the command was not run",
                        hold.what, hold.resource
                    );
                    return Err(ExitCode::from(exit::for_signal(signal)));
                }
                Event::Forward(signal) if !early.contains(&signal) => early.push(signal),
                // Ctrl-Z reached fencelock's whole process group already.
                Event::Stop => signals::stop_self(Signal::SIGTSTP, false),
                Event::Forward(_) | Event::Continued | Event::ChildChanged => {}
            }
        }
    };
    acquired.map_err(|e| {
        match e.kind() {
            ErrorKind::NotAcquired | ErrorKind::Timeout => eprintln!("fencelock: {e}; {}", hold.busy_hint),
            _ => eprintln!("fencelock: {e}"),
        }
        exit::for_error(e.kind())
    })
}

/// Runs the command until it exits or the lock is lost; `early` are
/// signals that came while waiting for the lock, forwarded once it starts.
async fn supervise(
    lock: &Lock,
    hold: &Hold<'_>,
    signals: &mut Signals,
    terminal: Option<&Terminal>,
    early: &[Signal],
) -> Result<Ending, u8> {
    let foreground = terminal.filter(|terminal| terminal.fencelock_in_foreground());
    let command = child::spawn(
        hold.command,
        hold.resource,
        lock.fence(),
        lock.permit(),
        foreground,
    )
    .map_err(|e| {
        eprintln!("fencelock: {}", e.message);
        e.code
    })?;
    let mut job = Job {
        lock,
        hold,
        command,
        terminal,
        stop_requested: false,
        continued_early: false,
    };
    for &signal in early {
        job.command.signal(signal);
    }
    let ending = job.run(signals).await;
    if let Some(terminal) = terminal {
        // The shell expects its job, fencelock, in the foreground until it exits.
        terminal.take_back_from(job.command.group());
    }
    ending
}

/// A running command and what fencelock knows about it.
struct Job<'a> {
    lock: &'a Lock,
    hold: &'a Hold<'a>,
    command: Child,
    terminal: Option<&'a Terminal>,
    /// fencelock was sent SIGTSTP and passed it on: follow the command's next stop.
    stop_requested: bool,
    /// fencelock resumed the command right after being continued: the
    /// SIGCONT that continued it is still to come as an event, and must not
    /// continue the command a second time (by then it may have been stopped
    /// again, by a quick Ctrl-Z).
    continued_early: bool,
}

impl Job<'_> {
    async fn run(&mut self, signals: &mut Signals) -> Result<Ending, u8> {
        loop {
            tokio::select! {
                status = self.command.wait() => {
                    return status.map(|s| Ending::Exited(child::exit_code(s))).map_err(|e| {
                        eprintln!("fencelock: lost track of the command: {e}");
                        exit::SOFTWARE
                    });
                }
                reason = self.lock.lost() => return Ok(self.stop_after_loss(&reason.to_string()).await),
                event = signals.next() => {
                    if !self.handle(event) {
                        let why = "its validity ran out while fencelock was stopped";
                        return Ok(self.stop_after_loss(why).await);
                    }
                }
            }
        }
    }

    /// Acts on one signal; false when the lock turned out lost on resuming.
    fn handle(&mut self, event: Event) -> bool {
        match event {
            Event::Forward(signal) => {
                tracing::info!(%signal, "forwarding signal to the command");
                self.command.signal(signal);
                true
            }
            Event::Stop => {
                self.stop_requested = true;
                self.command.signal(Signal::SIGTSTP);
                true
            }
            Event::Continued if self.continued_early => {
                self.continued_early = false;
                true
            }
            Event::Continued => self.resume(),
            Event::ChildChanged => match self.command.stopped() {
                Some(signal) if self.terminal.is_some() || self.stop_requested => {
                    self.stop_with_command(signal);
                    self.continued_early = true;
                    self.resume()
                }
                _ => true,
            },
        }
    }

    /// The command stopped: stop fencelock too, and return once it is continued.
    fn stop_with_command(&mut self, signal: Signal) {
        self.stop_requested = false;
        let group = self.command.group();
        // Stopped from the terminal (Ctrl-Z): the terminal would have stopped
        // fencelock's whole process group, had it not handed it the foreground.
        let from_terminal = self.terminal.is_some_and(|t| t.in_foreground(group));
        if let Some(terminal) = self.terminal {
            terminal.take_back_from(group);
        }
        tracing::info!(%signal, "the command stopped; stopping with it");
        signals::stop_self(signal, from_terminal);
    }

    /// fencelock was continued: continue the command, in the foreground if
    /// fencelock has it. False if the lock's validity ran out meanwhile
    /// (stopped for longer than the ttl): the command must not run on.
    fn resume(&mut self) -> bool {
        if !self.lock.is_held() {
            return false;
        }
        if let Some(terminal) = self.terminal
            && terminal.fencelock_in_foreground()
        {
            terminal.give_to(self.command.group());
        }
        self.command.signal(Signal::SIGCONT);
        true
    }

    /// Reports the loss and stops the command: SIGTERM, SIGKILL after the grace.
    async fn stop_after_loss(&mut self, reason: &str) -> Ending {
        eprintln!(
            "fencelock: lost the {} '{}': {reason}; stopping the command (SIGTERM, SIGKILL after {:?})",
            self.hold.what, self.hold.resource, self.hold.grace
        );
        let _ = self.command.terminate(self.hold.grace).await;
        Ending::Lost
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

//! Stopping an operation from elsewhere, the one way every front does it: a
//! Node `AbortSignal`, a cancelled asyncio task or Ctrl-C in Python,
//! `fencelock_operation_cancel` in C and a .NET `CancellationToken` all
//! raise a [`Canceller`], and the operation ends with
//! [`ErrorKind::Cancelled`].

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;

use crate::background::{self, Running};
use crate::error::{Error, ErrorKind, Result};

/// Cancels the operations it runs ([`Canceller::run`]), from any thread.
/// Clones raise the same cancellation; dropping one cancels nothing.
#[derive(Clone, Debug, Default)]
pub struct Canceller {
    token: CancellationToken,
    runs: Arc<Mutex<Runs>>,
}

/// The operations running under a canceller, and once it is raised, the
/// teardown they owe: the caller who raised it has its answer already,
/// while each operation is dropped (and its undo started) only when its
/// task next runs. `settle` waits for that teardown.
#[derive(Debug, Default)]
struct Runs {
    running: usize,
    teardown: Option<Running>,
}

impl Runs {
    fn lock(runs: &Mutex<Runs>) -> MutexGuard<'_, Runs> {
        runs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Canceller {
    /// A canceller not yet raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops every operation this canceller runs, now and later. Idempotent.
    pub fn cancel(&self) {
        let mut runs = Runs::lock(&self.runs);
        if runs.running > 0 && runs.teardown.is_none() {
            runs.teardown = Some(background::abandoned());
        }
        drop(runs);
        self.token.cancel();
    }

    /// Whether [`Canceller::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Runs `operation` until it ends or the canceller is raised. Then the
    /// operation is dropped, which undoes what it had started (an acquire
    /// deletes any partial grant in the background), and the result is
    /// [`ErrorKind::Cancelled`]. A canceller raised before the call cancels
    /// at once; an operation that has ended keeps its outcome.
    pub async fn run<F: Future>(&self, operation: F) -> Result<F::Output> {
        let _running = RunGuard::enter(&self.runs);
        // A statement, so the operation is dropped before the guard is.
        let outcome = self.token.run_until_cancelled(operation).await;
        outcome.ok_or_else(|| Error::new(ErrorKind::Cancelled, "the operation was cancelled"))
    }

    /// A guard that raises this canceller when dropped: for a caller whose
    /// wait may be interrupted (a panic, a signal) and who gives up on the
    /// operation by leaving the scope.
    pub fn cancel_on_drop(self) -> CancelOnDrop {
        CancelOnDrop { canceller: self }
    }
}

/// One [`Canceller::run`] under way; when the last one of a raised
/// canceller ends, its operations are gone and their teardown is done.
struct RunGuard<'a>(&'a Mutex<Runs>);

impl<'a> RunGuard<'a> {
    fn enter(runs: &'a Mutex<Runs>) -> Self {
        Runs::lock(runs).running += 1;
        RunGuard(runs)
    }
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        let mut runs = Runs::lock(self.0);
        runs.running -= 1;
        if runs.running == 0 {
            runs.teardown = None;
        }
    }
}

/// Raises its [`Canceller`] when dropped; see [`Canceller::cancel_on_drop`].
#[derive(Debug)]
#[must_use = "dropping the guard cancels at once"]
pub struct CancelOnDrop {
    canceller: Canceller,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.canceller.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_raised_canceller_stops_a_pending_operation() {
        let canceller = Canceller::new();
        let raise = canceller.clone();
        tokio::spawn(async move { raise.cancel() });
        let err = canceller
            .run(std::future::pending::<()>())
            .await
            .expect_err("cancelled");
        assert_eq!(err.kind(), ErrorKind::Cancelled);
        assert!(canceller.is_cancelled());
    }

    #[tokio::test]
    async fn an_operation_that_ended_keeps_its_outcome_and_dropping_a_clone_cancels_nothing() {
        let canceller = Canceller::new();
        drop(canceller.clone());
        assert_eq!(canceller.run(async { 7 }).await.unwrap(), 7);
        assert!(!canceller.is_cancelled());
    }

    #[tokio::test]
    async fn the_guard_cancels_when_dropped() {
        let canceller = Canceller::new();
        drop(canceller.clone().cancel_on_drop());
        let err = canceller.run(async { 7 }).await.expect_err("cancelled before");
        assert_eq!(err.kind(), ErrorKind::Cancelled);
    }
}

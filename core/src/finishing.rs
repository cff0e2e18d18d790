//! Work that, once asked for, runs to its end even if its caller stops
//! waiting for it.
//!
//! A release marks its lock released before its requests go out, so one
//! whose future is dropped halfway (a timeout around it, a front's cancel)
//! must still reach the nodes, and a lingering one must still hand on the
//! key it reserved: else the lock stays held until its ttl, or reserved for
//! nobody, while its holder believes it released. A front's cancel may also
//! come before the task was first polled; the caller asked for the release
//! all the same.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::runtime::Handle;

use crate::background::Background;
use crate::runtime;

/// Wraps `future` so that, dropped before its end (polled or not), it goes
/// on in a task of its own, counted in `background` (which
/// `Client::settle` waits for).
pub(crate) fn finishing<F>(future: F, background: Arc<Background>) -> Finishing<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Finishing {
        future: Some(Box::pin(future)),
        background,
    }
}

/// See [`finishing`].
pub(crate) struct Finishing<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// `None` once it has ended.
    future: Option<Pin<Box<F>>>,
    background: Arc<Background>,
}

impl<F> Future for Finishing<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let future = this.future.as_mut().expect("Finishing polled after it ended");
        let output = std::task::ready!(future.as_mut().poll(cx));
        this.future = None;
        Poll::Ready(output)
    }
}

impl<F> Drop for Finishing<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        let Some(future) = self.future.take() else {
            return;
        };
        // On the runtime that was polling it (its timers belong there), else
        // on the internal one. A runtime shutting down drops the task at once.
        let Ok(runtime) = Handle::try_current().or_else(|_| runtime::handle()) else {
            return;
        };
        let running = self.background.start();
        runtime.spawn(async move {
            let _running = running;
            future.await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::Waker;
    use std::time::Duration;

    /// A future that sleeps a moment, then sets its flag.
    fn flagging(flag: &Arc<AtomicBool>) -> impl Future<Output = ()> + Send + 'static {
        let flag = flag.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            flag.store(true, Ordering::SeqCst);
        }
    }

    fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
        future.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[tokio::test]
    async fn dropped_halfway_it_runs_to_its_end_and_is_counted() {
        let (flag, background) = (Arc::new(AtomicBool::new(false)), Arc::<Background>::default());
        let mut work = Box::pin(finishing(flagging(&flag), background.clone()));
        assert!(poll_once(work.as_mut()).is_pending());
        drop(work);
        tokio::time::timeout(Duration::from_secs(5), background.idle())
            .await
            .expect("the rest of the work ended");
        assert!(flag.load(Ordering::SeqCst), "the work did not finish");
    }

    /// A front's cancel can come before the task was first polled.
    #[tokio::test]
    async fn dropped_before_its_first_poll_it_still_runs() {
        let (flag, background) = (Arc::new(AtomicBool::new(false)), Arc::<Background>::default());
        drop(finishing(flagging(&flag), background.clone()));
        tokio::time::timeout(Duration::from_secs(5), background.idle())
            .await
            .expect("the work ended");
        assert!(flag.load(Ordering::SeqCst), "the work never ran");
    }

    #[tokio::test]
    async fn awaited_it_gives_its_output() {
        let background = Arc::<Background>::default();
        assert_eq!(finishing(async { 7 }, background.clone()).await, 7);
        background.idle().await;
    }
}

//! Per-request deadlines that share one tokio timer per millisecond.
//!
//! Every request to a node runs under the per-node timeout. A tokio timer
//! per request looks free but is not: when a timer is registered while the
//! runtime is busy, tokio wakes its I/O driver with an `eventfd` write
//! unless an earlier timer is already known to the driver, and after an
//! idle moment none is. A burst of 32 lock operations then paid 32 system
//! calls for timers that almost never fire (measured with the Node front:
//! four in five of the runtime thread's `write` calls, and a fifth of its
//! time in a noisy spell of the VM).
//!
//! Requests whose deadlines fall in the same millisecond therefore wait on
//! one shared timer: a burst registers one timer, not one per request. The
//! timer is dropped (and leaves tokio's wheel) as soon as no request waits
//! on it. A deadline may pass up to 1 ms later than asked, which is the
//! precision of tokio's own timers.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{Either, Shared, WeakShared};
use tokio::runtime::Handle;
use tokio::time::{Instant, Sleep};

/// The request's deadline passed first.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Elapsed;

type SharedSleep = Shared<Pin<Box<Sleep>>>;

/// The timer shared by the requests started on this thread in one millisecond.
struct Bucket {
    /// Timers belong to the runtime that made them (and read its clock,
    /// which a test may pause and advance).
    runtime: tokio::runtime::Id,
    /// The runtime's time when this thread first needed one of its timers:
    /// the origin of bucket numbers.
    origin: Instant,
    /// Milliseconds after `origin` at which the timer fires.
    ms: u64,
    timer: WeakShared<Pin<Box<Sleep>>>,
}

thread_local! {
    static BUCKET: RefCell<Option<Bucket>> = const { RefCell::new(None) };
}

/// Runs `future` until it finishes or `limit` has passed.
///
/// Must be called inside a tokio runtime with time enabled, like
/// [`tokio::time::timeout`].
pub(crate) async fn within<F: Future>(limit: Duration, future: F) -> Result<F::Output, Elapsed> {
    let timer = timer_for(limit);
    tokio::pin!(future);
    // The request first: a reply already there wins over a timer already due.
    match futures_util::future::select(future, timer).await {
        Either::Left((output, _)) => Ok(output),
        Either::Right(((), _)) => Err(Elapsed),
    }
}

/// Deadlines further out than this (about 30 years, as tokio caps its own
/// timeouts) wait for this long: nothing overflows.
const FAR_FUTURE_MS: u64 = 30 * 365 * 24 * 3600 * 1000;

/// A timer that fires once `limit` from now has passed (up to 1 ms later).
fn timer_for(limit: Duration) -> SharedSleep {
    let now = Instant::now();
    let runtime = Handle::current().id();
    BUCKET.with(|slot| {
        let mut slot = slot.borrow_mut();
        let origin = match slot.as_ref() {
            Some(bucket) if bucket.runtime == runtime => bucket.origin,
            _ => now,
        };
        let due = now.saturating_duration_since(origin).saturating_add(limit);
        // Round up to the next whole millisecond: never early.
        let ms = u64::try_from(due.as_nanos().div_ceil(1_000_000))
            .unwrap_or(u64::MAX)
            .min(FAR_FUTURE_MS);
        if let Some(bucket) = slot.as_ref()
            && bucket.runtime == runtime
            && bucket.ms == ms
            && let Some(timer) = bucket.timer.upgrade()
        {
            return timer;
        }
        let timer: SharedSleep =
            Box::pin(tokio::time::sleep_until(origin + Duration::from_millis(ms))).shared();
        if let Some(weak) = timer.downgrade() {
            *slot = Some(Bucket {
                runtime,
                origin,
                ms,
                timer: weak,
            });
        }
        timer
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paused_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    }

    #[test]
    fn a_finished_request_wins() {
        paused_runtime().block_on(async {
            assert_eq!(within(Duration::from_millis(5), async { 7 }).await, Ok(7));
        });
    }

    #[test]
    fn a_stuck_request_times_out_never_early_and_at_most_a_millisecond_late() {
        paused_runtime().block_on(async {
            let start = Instant::now();
            let result = within(Duration::from_millis(50), std::future::pending::<()>()).await;
            let waited = start.elapsed();
            assert_eq!(result, Err(Elapsed));
            assert!(waited >= Duration::from_millis(50), "fired early: {waited:?}");
            assert!(waited <= Duration::from_millis(52), "fired late: {waited:?}");
        });
    }

    #[test]
    fn requests_of_one_millisecond_share_a_timer() {
        paused_runtime().block_on(async {
            let first = timer_for(Duration::from_millis(100));
            let second = timer_for(Duration::from_millis(100));
            assert!(Shared::ptr_eq(&first, &second));
            let later = timer_for(Duration::from_millis(101));
            assert!(
                !Shared::ptr_eq(&first, &later),
                "a later deadline got an earlier timer"
            );
        });
    }

    #[test]
    fn a_timer_nobody_waits_on_is_dropped_and_replaced() {
        paused_runtime().block_on(async {
            let first = timer_for(Duration::from_millis(100));
            let weak = first.downgrade().unwrap();
            drop(first);
            assert!(weak.upgrade().is_none(), "the timer outlived its requests");
            let start = Instant::now();
            timer_for(Duration::from_millis(100)).await;
            assert!(start.elapsed() >= Duration::from_millis(100));
        });
    }

    #[test]
    fn a_timer_is_not_shared_across_runtimes() {
        let (one, two) = (paused_runtime(), paused_runtime());
        let (first, ms) = {
            let _inside = one.enter();
            let timer = timer_for(Duration::from_secs(10));
            (timer, BUCKET.with(|slot| slot.borrow().as_ref().unwrap().ms))
        };
        let _inside = two.enter();
        // The same bucket number, on the other runtime's clock.
        let second = timer_for(Duration::from_millis(ms));
        assert_eq!(BUCKET.with(|slot| slot.borrow().as_ref().unwrap().ms), ms);
        assert!(!Shared::ptr_eq(&first, &second));
    }

    #[test]
    fn a_huge_limit_does_not_overflow() {
        paused_runtime().block_on(async {
            let result = within(Duration::MAX, async { 1 }).await;
            assert_eq!(result, Ok(1));
        });
    }
}

//! Where quorum is decided: fan a request out to every node in parallel and
//! stop as soon as a majority has decided either way.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The majority rule for `n` nodes: `n / 2 + 1` must agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Quorum {
    nodes: usize,
    needed: usize,
}

impl Quorum {
    pub(crate) fn of(nodes: usize) -> Self {
        Quorum {
            nodes,
            needed: nodes / 2 + 1,
        }
    }

    /// How many nodes must agree.
    pub(crate) fn needed(self) -> usize {
        self.needed
    }

    /// `yes` agreeing nodes are enough.
    pub(crate) fn reached(self, yes: usize) -> bool {
        yes >= self.needed
    }

    /// With `no` nodes refusing, a majority can no longer agree.
    pub(crate) fn impossible(self, no: usize) -> bool {
        no > self.nodes - self.needed
    }
}

/// What [`decide`] found, and the requests that were still on their way.
pub(crate) struct Decided<R, F: Future> {
    /// Each node's result in node order; `None` for a node that had not
    /// answered when the quorum decided.
    pub(crate) replies: Vec<Option<R>>,
    pub(crate) stragglers: Stragglers<F>,
}

/// Requests that had not answered when the quorum decided.
///
/// Dropping them cancels them: a request still queued in its connection is
/// then never sent (redis-rs skips requests nobody awaits), one already
/// written still runs. That is right for a failed attempt, which must not
/// land anywhere later. After a success, [`Stragglers::finish_in_background`]
/// lets them reach their nodes, so a lock sits on every reachable node and
/// not only on the majority that answered first.
pub(crate) struct Stragglers<F: Future>(Option<InFlight<F>>);

impl<R, F: Future> Decided<R, F> {
    /// A decision with every reply in and nothing left on its way.
    pub(crate) fn settled(replies: Vec<Option<R>>) -> Self {
        Decided {
            replies,
            stragglers: Stragglers(None),
        }
    }
}

impl<F> Stragglers<F>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    /// Drives the remaining requests to their replies (or per-node timeouts)
    /// on the current runtime, replies ignored. `None` if nothing was left.
    /// Dropping the handle leaves the task running.
    pub(crate) fn finish_in_background(self) -> Option<tokio::task::JoinHandle<()>> {
        self.finish_holding(|| ())
    }

    /// [`Stragglers::finish_in_background`], keeping the guard `hold()`
    /// makes (only if there is anything left) until they are done.
    pub(crate) fn finish_holding<G: Send + 'static>(
        self,
        hold: impl FnOnce() -> G,
    ) -> Option<tokio::task::JoinHandle<()>> {
        self.finish_each(hold, drop)
    }

    /// [`Stragglers::finish_holding`], telling `on_reply` each reply as it comes.
    pub(crate) fn finish_each<G: Send + 'static>(
        self,
        hold: impl FnOnce() -> G,
        mut on_reply: impl FnMut(F::Output) + Send + 'static,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let mut pending = self.0.filter(|pending| !pending.is_empty())?;
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let guard = hold();
        Some(runtime.spawn(async move {
            let _guard = guard;
            while let Some(reply) = pending.next().await {
                on_reply(reply);
            }
        }))
    }
}

/// Runs one future per node concurrently (each resolving to its node's
/// index and result) and returns as soon as `is_yes` answers have reached a
/// quorum or enough other answers have made one impossible. Callers must
/// treat a `None` node as unknown: acquire undoes a failed attempt on every
/// node, and a granted lock may still be on its way to the other nodes.
pub(crate) async fn decide<R, F>(
    requests: impl IntoIterator<Item = F>,
    quorum: Quorum,
    is_yes: impl Fn(&R) -> bool,
) -> Decided<R, F>
where
    F: Future<Output = (usize, R)>,
{
    gather(requests, by_quorum(quorum, is_yes)).await
}

/// The decision rule of [`decide`], for [`gather`]: settled once `is_yes`
/// answers reach a quorum or the others make one impossible.
pub(crate) fn by_quorum<R>(quorum: Quorum, is_yes: impl Fn(&R) -> bool) -> impl FnMut(usize, &R) -> bool {
    let (mut yes, mut no) = (0, 0);
    move |_, result| {
        if is_yes(result) {
            yes += 1;
        } else {
            no += 1;
        }
        quorum.reached(yes) || quorum.impossible(no)
    }
}

/// Runs one future per node concurrently and collects their results until
/// `decided(index, result)`, told of each result as it comes, says the
/// outcome is settled (or every request has answered).
pub(crate) async fn gather<R, F>(
    requests: impl IntoIterator<Item = F>,
    mut decided: impl FnMut(usize, &R) -> bool,
) -> Decided<R, F>
where
    F: Future<Output = (usize, R)>,
{
    let mut pending = InFlight::new(requests);
    let mut replies: Vec<Option<R>> = (0..pending.len()).map(|_| None).collect();
    while let Some((index, result)) = pending.next().await {
        let done = decided(index, &result);
        replies[index] = Some(result);
        if done {
            break;
        }
    }
    Decided {
        replies,
        stragglers: Stragglers(Some(pending)),
    }
}

/// The requests of one decision, polled where they lie: one allocation for
/// all of them. (A `FuturesUnordered` makes one per request and copies each
/// request into it: a measurable share of a 5-node lock cycle.)
///
/// Every look polls every request still pending, so each request has been
/// polled (handed to its connection, in line behind what was sent before)
/// by the time the first answer comes out: a decision never leaves a
/// request unsent that a later request could overtake. Cheap for a handful
/// of nodes.
struct InFlight<F: Future> {
    slots: Pin<Box<[Slot<F>]>>,
    /// Requests not yet polled to their end.
    running: usize,
    /// Outputs not yet handed out (running ones included).
    left: usize,
}

enum Slot<F: Future> {
    Running(F),
    Done(F::Output),
    Taken,
}

impl<F: Future> InFlight<F> {
    fn new(requests: impl IntoIterator<Item = F>) -> Self {
        let slots: Box<[Slot<F>]> = requests.into_iter().map(Slot::Running).collect();
        InFlight {
            running: slots.len(),
            left: slots.len(),
            slots: Box::into_pin(slots),
        }
    }

    fn len(&self) -> usize {
        self.slots.len()
    }

    fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// The output of the next request to finish; `None` once all have.
    fn next(&mut self) -> impl Future<Output = Option<F::Output>> + '_ {
        std::future::poll_fn(|cx| self.poll_next(cx))
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        // SAFETY: the slice is never moved out of its box, and a running
        // request is only ever dropped in place (its slot overwritten):
        // pinned requests stay where they are until dropped, as `Pin`
        // requires. `Done` and `Taken` slots hold nothing pinned.
        let slots = unsafe { self.slots.as_mut().get_unchecked_mut() };
        if self.running > 0 {
            for slot in slots.iter_mut() {
                let Slot::Running(request) = slot else { continue };
                // SAFETY: as above.
                let request = unsafe { Pin::new_unchecked(request) };
                if let Poll::Ready(output) = request.poll(cx) {
                    *slot = Slot::Done(output);
                    self.running -= 1;
                }
            }
        }
        for slot in slots.iter_mut() {
            if matches!(slot, Slot::Done(_)) {
                let Slot::Done(output) = std::mem::replace(slot, Slot::Taken) else {
                    unreachable!("just matched")
                };
                self.left -= 1;
                return Poll::Ready(Some(output));
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_rule() {
        for (n, needed) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)] {
            let q = Quorum::of(n);
            assert_eq!(q.needed(), needed);
            assert!(q.reached(needed) && !q.reached(needed - 1));
            assert!(q.impossible(n - needed + 1) && !q.impossible(n - needed));
        }
    }

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Node `i` answers `ok` after `ms` milliseconds, counting its answer in `done`.
    fn answer(
        i: usize,
        ms: u64,
        ok: bool,
        done: &Arc<AtomicUsize>,
    ) -> impl Future<Output = (usize, bool)> + Send + 'static {
        let done = done.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            done.fetch_add(1, Ordering::SeqCst);
            (i, ok)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn decides_without_waiting_for_stragglers_and_can_let_them_finish() {
        let done = Arc::new(AtomicUsize::new(0));
        let delays = [1u64, 2, 3, 10_000, 10_000];
        let started = tokio::time::Instant::now();
        let decided = decide(
            delays
                .iter()
                .enumerate()
                .map(|(i, &ms)| answer(i, ms, true, &done)),
            Quorum::of(5),
            |ok| *ok,
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(decided.replies.iter().filter(|r| r.is_some()).count(), 3);
        assert!(decided.replies[3].is_none() && decided.replies[4].is_none());
        let task = decided.stragglers.finish_in_background();
        assert!(task.is_some(), "two requests were still on their way");
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert_eq!(done.load(Ordering::SeqCst), 5, "the stragglers ran to their end");
    }

    /// A request that was never polled was never handed to its connection,
    /// so a request sent after the decision could overtake it.
    #[tokio::test(start_paused = true)]
    async fn every_request_is_on_its_way_before_the_decision() {
        let polled = Arc::new(AtomicUsize::new(0));
        let request = |i: usize, ready: bool| {
            let polled = polled.clone();
            async move {
                polled.fetch_add(1, Ordering::SeqCst);
                if !ready {
                    std::future::pending::<()>().await;
                }
                (i, false)
            }
        };
        // Two refusals decide a 3-node quorum before the third answers.
        let decided = decide(
            [request(0, true), request(1, true), request(2, false)],
            Quorum::of(3),
            |ok| *ok,
        )
        .await;
        assert!(decided.replies[2].is_none());
        assert_eq!(
            polled.load(Ordering::SeqCst),
            3,
            "the third request was never sent"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn decides_failure_early_and_dropping_stragglers_cancels_them() {
        let done = Arc::new(AtomicUsize::new(0));
        let answers = [(1u64, false), (2, false), (10_000, true)]
            .into_iter()
            .enumerate()
            .map(|(i, (ms, ok))| answer(i, ms, ok, &done));
        let decided = decide(answers, Quorum::of(3), |ok| *ok).await;
        assert_eq!(decided.replies.iter().filter(|r| r.is_some()).count(), 2);
        assert!(decided.replies[2].is_none());
        drop(decided.stragglers);
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert_eq!(done.load(Ordering::SeqCst), 2, "a dropped straggler still ran");
    }
}

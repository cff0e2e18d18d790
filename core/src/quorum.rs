//! Where quorum is decided: fan a request out to every node in parallel and
//! stop as soon as a majority has decided either way.

use std::future::Future;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

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

/// Runs one future per node concurrently and returns each node's result in
/// node order, as soon as `is_yes` answers have reached a quorum or enough
/// other answers have made one impossible. Nodes that had not answered by then
/// are `None`, and their requests are dropped: a request still queued in the
/// connection is then never sent (redis-rs skips requests nobody awaits), one
/// already written still runs. Callers must treat a `None` node as unknown:
/// acquire undoes a failed attempt on every node, and a granted lock may be
/// missing from the nodes outside the quorum.
pub(crate) async fn decide<R, F>(
    requests: impl IntoIterator<Item = F>,
    quorum: Quorum,
    is_yes: impl Fn(&R) -> bool,
) -> Vec<Option<R>>
where
    F: Future<Output = R>,
{
    let mut pending: FuturesUnordered<_> = requests
        .into_iter()
        .enumerate()
        .map(|(index, request)| async move { (index, request.await) })
        .collect();
    let mut results: Vec<Option<R>> = (0..pending.len()).map(|_| None).collect();
    let (mut yes, mut no) = (0, 0);
    while let Some((index, result)) = pending.next().await {
        if is_yes(&result) {
            yes += 1;
        } else {
            no += 1;
        }
        results[index] = Some(result);
        if quorum.reached(yes) || quorum.impossible(no) {
            break;
        }
    }
    results
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

    #[tokio::test]
    async fn decides_without_waiting_for_stragglers() {
        use std::time::Duration;
        let delays = [1u64, 2, 3, 10_000, 10_000];
        let started = std::time::Instant::now();
        let results = decide(
            delays.iter().map(|&ms| async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                true
            }),
            Quorum::of(5),
            |ok| *ok,
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(results.iter().filter(|r| r.is_some()).count(), 3);
        assert!(results[3].is_none() && results[4].is_none());
    }

    #[tokio::test]
    async fn decides_failure_early() {
        use std::time::Duration;
        let answers = [(1u64, false), (2, false), (10_000, true)].map(|(ms, ok)| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ok
        });
        let results = decide(answers, Quorum::of(3), |ok| *ok).await;
        assert_eq!(results.iter().filter(|r| r.is_some()).count(), 2);
        assert!(results[2].is_none());
    }
}

//! Auto-renewal: one task per client renews every held lock at `ttl/3`,
//! batching the locks that fall due together into one pipeline per node.
//!
//! A renewal that finds the key missing or owned by another on a majority is
//! a definite loss, signalled at once. Transient failures are retried until
//! the lock's local (monotonic) validity runs out, then loss is signalled.
//! Jobs hold only weak references and a schedule generation, so dropping or
//! releasing a lock stops its renewals without any I/O.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::error::NodeOutcome;
use crate::lock::{LockState, LockStatus, LossReason};
use crate::node::Reply;
use crate::node_set::{CompareAndAct, NodeSet, compare_and_act};
use crate::scripts;

/// The client's handle on its renewal task.
pub(crate) struct Watchdog {
    jobs: mpsc::UnboundedSender<Job>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JobKind {
    /// Renew the lock's ttl on every node.
    Renew,
    /// Check that an unrenewed lease has run out, and signal it.
    Expire,
}

struct Job {
    due: Instant,
    /// How early the job may run, so locks due close together share a batch.
    slack: Duration,
    generation: u64,
    kind: JobKind,
    lock: Weak<LockState>,
}

/// Renewal may run this fraction of the renew interval early to join a batch.
const BATCH_SLACK_DIVISOR: u32 = 10;

/// The shortest wait before retrying a renewal that failed transiently.
const MIN_RETRY: Duration = Duration::from_millis(10);

impl Watchdog {
    /// Starts the renewal task on `runtime`. It ends when the client and all its locks are gone.
    pub(crate) fn start(nodes: Arc<NodeSet>, runtime: &tokio::runtime::Handle) -> Self {
        let (jobs, inbox) = mpsc::unbounded_channel();
        runtime.spawn(run(nodes, inbox, jobs.downgrade()));
        Watchdog { jobs }
    }

    /// Plans the next job for a lock whose timing just changed (grant, extend).
    pub(crate) fn reschedule(&self, lock: &Arc<LockState>) {
        let _ = self.jobs.send(next_job(lock, Instant::now()));
    }
}

/// The next job for `lock`, after a grant or renewal that was sent at `sent`.
fn next_job(lock: &Arc<LockState>, sent: Instant) -> Job {
    let timing = *lock.timing();
    let interval = timing.ttl / 3;
    let renew_at = sent + interval;
    let within_hold = lock
        .renewal
        .max_hold
        .is_none_or(|max| renew_at + timing.ttl <= lock.acquired_at + max);
    let within_count = lock.renewal.max_renewals.is_none_or(|max| timing.renewals < max);
    let (kind, due, slack) = if lock.renewal.auto && within_hold && within_count {
        (JobKind::Renew, renew_at, interval / BATCH_SLACK_DIVISOR)
    } else {
        (JobKind::Expire, timing.valid_until, Duration::ZERO)
    };
    Job {
        due,
        slack,
        generation: timing.generation,
        kind,
        lock: Arc::downgrade(lock),
    }
}

/// Orders the heap by due time, earliest first.
struct Queued(Job);

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.0.due == other.0.due
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.due.cmp(&other.0.due)
    }
}

async fn run(
    nodes: Arc<NodeSet>,
    mut inbox: mpsc::UnboundedReceiver<Job>,
    requeue: mpsc::WeakUnboundedSender<Job>,
) {
    let mut queue: BinaryHeap<Reverse<Queued>> = BinaryHeap::new();
    loop {
        let next_due = queue.peek().map(|Reverse(Queued(job))| job.due);
        tokio::select! {
            received = inbox.recv() => match received {
                Some(job) => queue.push(Reverse(Queued(job))),
                None => return,
            },
            () = sleep_until(next_due) => {
                let batch = take_due(&mut queue, Instant::now());
                if let Some(requeue) = requeue.upgrade() {
                    tokio::spawn(run_batch(nodes.clone(), batch, requeue));
                }
            }
        }
    }
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due.into()).await,
        None => std::future::pending().await,
    }
}

fn take_due(queue: &mut BinaryHeap<Reverse<Queued>>, now: Instant) -> Vec<Job> {
    let mut batch = Vec::new();
    while let Some(Reverse(Queued(job))) = queue.peek() {
        if job.due.checked_sub(job.slack).unwrap_or(job.due) > now {
            break;
        }
        if let Some(Reverse(Queued(job))) = queue.pop() {
            batch.push(job);
        }
    }
    batch
}

/// A lock taken out of the queue for renewal, with its operation guard held.
struct Renewing {
    lock: Arc<LockState>,
    ttl: Duration,
    _busy: tokio::sync::OwnedMutexGuard<()>,
}

async fn run_batch(nodes: Arc<NodeSet>, batch: Vec<Job>, requeue: mpsc::UnboundedSender<Job>) {
    let now = Instant::now();
    let mut renewing = Vec::new();
    for job in batch {
        let Some(lock) = job.lock.upgrade() else {
            continue;
        };
        let timing = *lock.timing();
        if job.generation != timing.generation || lock.status() != LockStatus::Held {
            continue;
        }
        if now >= timing.valid_until {
            let reason = if job.kind == JobKind::Expire {
                LossReason::Expired
            } else {
                LossReason::Unreachable
            };
            lock.mark_lost(reason);
            continue;
        }
        if job.kind == JobKind::Expire {
            let _ = requeue.send(next_job(&lock, now));
            continue;
        }
        // A release or extend in progress owns the lock's schedule; look again shortly.
        let Ok(busy) = lock.busy.clone().try_lock_owned() else {
            let _ = requeue.send(retry_job(&lock, now, timing.ttl));
            continue;
        };
        // Checked again under the guard: a release or extend may have run meanwhile,
        // and only one chain of renewal jobs may exist per lock.
        if lock.status() != LockStatus::Held || lock.timing().generation != job.generation {
            continue;
        }
        renewing.push(Renewing {
            lock,
            ttl: timing.ttl,
            _busy: busy,
        });
    }
    if renewing.is_empty() {
        return;
    }
    tracing::debug!(locks = renewing.len(), "renewing");
    let sent = Instant::now();
    let replies = renew_on_every_node(&nodes, &renewing).await;
    for (index, item) in renewing.iter().enumerate() {
        let per_node: Vec<Option<Reply>> = replies.iter().map(|node| Some(node[index].clone())).collect();
        settle(&nodes, item, &per_node, sent, &requeue);
    }
}

/// One pipeline per node carrying every lock of the batch; all nodes in parallel.
async fn renew_on_every_node(nodes: &NodeSet, renewing: &[Renewing]) -> Vec<Vec<Reply>> {
    let ttls: Vec<String> = renewing.iter().map(|r| r.ttl.as_millis().to_string()).collect();
    let calls: Vec<(Vec<&str>, Vec<&str>)> = renewing
        .iter()
        .zip(&ttls)
        .map(|(r, ttl)| {
            (
                vec![r.lock.keys.lock.as_str()],
                vec![r.lock.token.as_str(), ttl.as_str()],
            )
        })
        .collect();
    let per_node = nodes.nodes().iter().map(|node| {
        let calls = &calls;
        async move {
            match node.eval_many(&scripts::EXTEND, calls).await {
                Ok(replies) => replies,
                Err(outcome) => vec![Err(outcome); calls.len()],
            }
        }
    });
    futures_util::future::join_all(per_node).await
}

/// Applies one lock's renewal replies: renewed, lost, or retry.
fn settle(
    nodes: &NodeSet,
    item: &Renewing,
    replies: &[Option<Reply>],
    sent: Instant,
    requeue: &mpsc::UnboundedSender<Job>,
) {
    let lock = &item.lock;
    let (done, not_ours, taken) = crate::node_set::tally(replies);
    let quorum = nodes.quorum();
    if quorum.reached(done)
        && let Some(valid_until) = nodes.valid_until(sent, item.ttl)
    {
        {
            let mut timing = lock.timing();
            timing.valid_until = valid_until;
            timing.renewals += 1;
        }
        tracing::trace!(resource = %lock.resource, "lock renewed");
        let _ = requeue.send(next_job(lock, sent));
        return;
    }
    if quorum.impossible(not_ours) {
        lock.mark_lost(if taken {
            LossReason::TakenOver
        } else {
            LossReason::Deleted
        });
        return;
    }
    let failures: Vec<String> = nodes
        .nodes()
        .iter()
        .zip(replies)
        .filter(|(_, reply)| {
            !matches!(
                reply.as_ref().map(compare_and_act),
                Some(Some(CompareAndAct::Done))
            )
        })
        .map(|(node, reply)| match reply {
            Some(Err(NodeOutcome::TimedOut)) => format!("{}: timed out", node.endpoint()),
            Some(Err(outcome)) => format!("{}: {outcome}", node.endpoint()),
            _ => format!("{}: not renewed", node.endpoint()),
        })
        .collect();
    tracing::warn!(resource = %lock.resource, renewed_on = done, failures = ?failures, "renewal failed; retrying");
    let _ = requeue.send(retry_job(lock, Instant::now(), item.ttl));
}

/// A renewal retry soon, but never later than the end of validity (when loss is signalled).
fn retry_job(lock: &Arc<LockState>, now: Instant, ttl: Duration) -> Job {
    let timing = *lock.timing();
    let remaining = timing.valid_until.saturating_duration_since(now);
    let delay = (ttl / 9).min(remaining / 2).max(MIN_RETRY);
    Job {
        due: (now + delay).min(timing.valid_until),
        slack: Duration::ZERO,
        generation: timing.generation,
        kind: JobKind::Renew,
        lock: Arc::downgrade(lock),
    }
}

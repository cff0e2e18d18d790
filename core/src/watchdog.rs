//! Auto-renewal: one task per client renews every held lock at `ttl/3`,
//! batching the locks that fall due together into one pipeline per node.
//!
//! A renewal that finds the key missing or owned by another on a majority is
//! a definite loss, signalled at once. Transient failures are retried until
//! the lock's local (monotonic) validity runs out, then loss is signalled.
//!
//! The schedule is an ordered map shared with the lock handles: acquiring
//! inserts a job, and releasing or dropping a lock removes it at once, so
//! short-lived locks cost two map operations and never wake the task: it is
//! woken only by a job due before the time it is already sleeping until.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::compare_and_act::{CompareAndAct, compare_and_act};
use crate::connection::pipeline;
use crate::error::NodeOutcome;
use crate::lock_state::{JobKey, LockState, LockStatus, LossReason, Timing};
use crate::node::{Node, Reply, eval_cmd};
use crate::node_set::{NodeSet, outcome, tally};
use crate::quorum::gather;
use crate::scripts;

/// Renewals sent in one pipeline at most; larger batches are split.
const MAX_BATCH: usize = 512;

/// Renewal may run this fraction of the renew interval early to join a batch.
const BATCH_SLACK_DIVISOR: u32 = 10;

/// The shortest wait before retrying a renewal that failed transiently.
const MIN_RETRY: Duration = Duration::from_millis(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JobKind {
    /// Renew the lock's ttl on every node.
    Renew,
    /// Signal loss when an unrenewed lease runs out.
    Expire,
}

struct Job {
    /// How early the job may run, so locks due close together share a batch.
    slack: Duration,
    kind: JobKind,
    lock: Weak<LockState>,
}

/// The jobs, and when the renewal task will next look at them.
#[derive(Default)]
struct Jobs {
    queue: BTreeMap<JobKey, Job>,
    /// When the sleeping task wakes by itself; `None`: only when notified.
    /// A job due before this must wake it. Kept apart from the queue's first
    /// key, which moves later whenever locks are released: comparing with it
    /// would wake the task (a thread on another runtime) for nothing at every
    /// burst of short-lived locks.
    task_wakes_at: Option<Instant>,
}

/// The jobs, shared by the client, its locks and the renewal task.
struct Schedule {
    jobs: Mutex<Jobs>,
    seq: AtomicU64,
    /// Wakes the task when a new earliest job arrives, or when the schedule is dropped.
    wake: Arc<Notify>,
}

/// The client's handle on its renewal task.
pub(crate) struct Watchdog {
    schedule: Arc<Schedule>,
}

impl Watchdog {
    /// Starts the renewal task on `runtime`. It ends when the watchdog is dropped
    /// (the client and all its locks are gone).
    pub(crate) fn start(nodes: Arc<NodeSet>, runtime: &tokio::runtime::Handle) -> Self {
        let wake = Arc::new(Notify::new());
        let schedule = Arc::new(Schedule {
            jobs: Mutex::new(Jobs::default()),
            seq: AtomicU64::new(0),
            wake: wake.clone(),
        });
        runtime.spawn(run(nodes, Arc::downgrade(&schedule), wake));
        Watchdog { schedule }
    }

    /// Replaces the lock's job by the one its current validity calls for
    /// (after a grant, a renewal or an extend).
    pub(crate) fn plan(&self, lock: &Arc<LockState>) {
        self.schedule.plan(lock);
    }

    /// Removes the lock's job: no renewal or expiry check happens after this.
    pub(crate) fn cancel(&self, lock: &LockState) {
        self.schedule.cancel(lock);
    }
}

impl Schedule {
    fn plan(&self, lock: &Arc<LockState>) {
        let mut timing = lock.timing();
        if let Some(old) = timing.job.take() {
            self.lock().queue.remove(&old);
        }
        let (key, job) = next_job(lock, &timing, self.next_seq());
        self.insert(&mut timing, key, job);
    }

    /// Queues `job` as the lock's one job; wakes the task if it would otherwise sleep past it.
    fn insert(&self, timing: &mut Timing, key: JobKey, job: Job) {
        let mut jobs = self.lock();
        let too_late = jobs.task_wakes_at.is_none_or(|wakes_at| key.due < wakes_at);
        if too_late {
            // Woken now, the task will sleep until this job at the latest.
            jobs.task_wakes_at = Some(key.due);
        }
        jobs.queue.insert(key, job);
        drop(jobs);
        timing.job = Some(key);
        if too_late {
            self.wake.notify_one();
        }
    }

    fn cancel(&self, lock: &LockState) {
        if let Some(key) = lock.timing().job.take() {
            self.lock().queue.remove(&key);
        }
    }

    /// Schedules a renewal retry soon, never later than the end of validity.
    fn retry(&self, lock: &Arc<LockState>, popped: JobKey, ttl: Duration) {
        let mut timing = lock.timing();
        if timing.job != Some(popped) {
            return; // released, dropped or extended meanwhile
        }
        let now = Instant::now();
        let remaining = timing.valid_until.saturating_duration_since(now);
        let delay = (ttl / 9).min(remaining / 2).max(MIN_RETRY);
        // Due by the end of validity, when the loss is; once that has passed
        // (a release or extend holds the lock meanwhile), not at once, which
        // would spin until it lets go.
        let due = if timing.valid_until > now {
            (now + delay).min(timing.valid_until)
        } else {
            now + MIN_RETRY
        };
        let key = JobKey {
            due,
            seq: self.next_seq(),
        };
        let job = Job {
            slack: Duration::ZERO,
            kind: JobKind::Renew,
            lock: Arc::downgrade(lock),
        };
        self.insert(&mut timing, key, job);
    }

    fn lock(&self) -> MutexGuard<'_, Jobs> {
        // Plain data: a panic elsewhere cannot leave the map half-updated.
        self.jobs.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Takes every job that may run now; returns them and when the next one
    /// is due, which is when the task, going to sleep, will wake by itself.
    fn take_due(&self, now: Instant) -> (Vec<(JobKey, Job)>, Option<Instant>) {
        let mut jobs = self.lock();
        let mut due = Vec::new();
        while let Some(entry) = jobs.queue.first_entry() {
            let ready_at = entry
                .key()
                .due
                .checked_sub(entry.get().slack)
                .unwrap_or(entry.key().due);
            if ready_at > now {
                break;
            }
            due.push(entry.remove_entry());
        }
        let next = jobs.queue.first_key_value().map(|(key, _)| key.due);
        jobs.task_wakes_at = next;
        (due, next)
    }
}

impl Drop for Schedule {
    fn drop(&mut self) {
        // Wake the task so it sees the schedule is gone and ends.
        self.wake.notify_one();
    }
}

/// The next job for `lock`: a renewal once a third of its lease has passed
/// (the lease that decides its validity), or the end of an unrenewed lease.
fn next_job(lock: &Arc<LockState>, timing: &Timing, seq: u64) -> (JobKey, Job) {
    let interval = timing.lease_ttl / 3;
    let renew_at = timing
        .valid_until
        .checked_sub(timing.lease_ttl - interval)
        .unwrap_or(timing.valid_until);
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
    let job = Job {
        slack,
        kind,
        lock: Arc::downgrade(lock),
    };
    (JobKey { due, seq }, job)
}

async fn run(nodes: Arc<NodeSet>, schedule: Weak<Schedule>, wake: Arc<Notify>) {
    loop {
        let next_due = {
            let Some(schedule) = schedule.upgrade() else {
                return;
            };
            let (due, next_due) = schedule.take_due(Instant::now());
            let mut due = due.into_iter().peekable();
            while due.peek().is_some() {
                let batch: Vec<_> = due.by_ref().take(MAX_BATCH).collect();
                tokio::spawn(run_batch(nodes.clone(), batch, Arc::downgrade(&schedule)));
            }
            next_due
        };
        match next_due {
            Some(due) => {
                tokio::select! {
                    () = tokio::time::sleep_until(due.into()) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

/// A lock taken out of the schedule for renewal, with its operation guard held.
struct Renewing {
    lock: Arc<LockState>,
    key: JobKey,
    ttl: Duration,
    _busy: tokio::sync::OwnedMutexGuard<()>,
}

async fn run_batch(nodes: Arc<NodeSet>, batch: Vec<(JobKey, Job)>, schedule: Weak<Schedule>) {
    let now = Instant::now();
    let mut renewing = Vec::with_capacity(batch.len());
    for (key, job) in batch {
        let Some(lock) = job.lock.upgrade() else { continue };
        let Ok(busy) = lock.busy.clone().try_lock_owned() else {
            // A release or extend is in progress. Look again shortly; a release
            // cancels this retry, a successful extend replaces it.
            if let Some(schedule) = schedule.upgrade() {
                let ttl = lock.timing().ttl;
                schedule.retry(&lock, key, ttl);
            }
            continue;
        };
        let (job_key, valid_until, ttl) = {
            let timing = lock.timing();
            (timing.job, timing.valid_until, timing.ttl)
        };
        if job_key != Some(key) || lock.status() != LockStatus::Held {
            continue;
        }
        if now >= valid_until {
            let reason = match job.kind {
                JobKind::Expire => LossReason::Expired,
                JobKind::Renew => LossReason::Unreachable,
            };
            lock.mark_lost(reason);
            continue;
        }
        match job.kind {
            JobKind::Expire => replan(&schedule, &lock),
            JobKind::Renew => renewing.push(Renewing {
                lock,
                key,
                ttl,
                _busy: busy,
            }),
        }
    }
    if renewing.is_empty() {
        return;
    }
    tracing::debug!(locks = renewing.len(), "renewing");
    let sent = Instant::now();
    let renewed = renew_on_every_node(&nodes, &renewing, sent).await;
    for (index, item) in renewing.iter().enumerate() {
        settle(&nodes, &schedule, item, &renewed, index, sent);
    }
}

fn replan(schedule: &Weak<Schedule>, lock: &Arc<LockState>) {
    if let Some(schedule) = schedule.upgrade() {
        schedule.plan(lock);
    }
}

/// What one batch of renewals got from the nodes.
struct Renewed {
    /// Per node, its pipeline's replies (one per lock), or why it failed;
    /// `None` when the batch was decided before the node answered.
    replies: Vec<Option<Result<Vec<Reply>, NodeOutcome>>>,
    /// Per node, the connection its pipeline went on; `None`: never sent.
    generations: Vec<Option<u32>>,
}

impl Renewed {
    /// Node `node`'s reply for the batch's lock number `lock`.
    fn reply(&self, node: usize, lock: usize) -> Option<Reply> {
        match self.replies[node].as_ref()? {
            Ok(replies) => Some(replies[lock].clone()),
            Err(outcome) => Some(Err(outcome.clone())),
        }
    }
}

/// One pipeline per node carrying every lock of the batch, all nodes in
/// parallel, decided as soon as every lock's renewal is (a quorum renewed
/// it, or can no longer); the slower nodes' pipelines go on in the background.
async fn renew_on_every_node(nodes: &Arc<NodeSet>, renewing: &[Renewing], sent: Instant) -> Renewed {
    let calls = Arc::new(renewal_pipeline(renewing));
    // Chosen before anything is sent, so each request's connection is known.
    let connections: Vec<_> = nodes.nodes().iter().map(Node::background).collect();
    let generations: Vec<Option<u32>> = connections
        .iter()
        .map(|c| c.as_ref().ok().map(|live| live.generation))
        .collect();
    count_as_under_way(nodes, renewing, &generations, sent);
    let requests = connections.into_iter().enumerate().map(|(index, connection)| {
        let (nodes, calls) = (nodes.clone(), calls.clone());
        async move {
            let replies = match connection {
                Ok(live) => nodes.nodes()[index].eval_pipeline(live, &calls).await,
                Err(outcome) => Err(outcome),
            };
            (index, replies)
        }
    });
    let quorum = nodes.quorum();
    let mut votes = vec![(0usize, 0usize); renewing.len()];
    let mut undecided = renewing.len();
    let decided = gather(requests, |_, replies: &Result<Vec<Reply>, NodeOutcome>| {
        for (lock, (yes, no)) in votes.iter_mut().enumerate() {
            let was_decided = quorum.reached(*yes) || quorum.impossible(*no);
            let renewed = replies
                .as_ref()
                .is_ok_and(|r| compare_and_act(&r[lock]) == Some(CompareAndAct::Done));
            if renewed {
                *yes += 1;
            } else {
                *no += 1;
            }
            if !was_decided && (quorum.reached(*yes) || quorum.impossible(*no)) {
                undecided -= 1;
            }
        }
        undecided == 0
    })
    .await;
    decided.stragglers.finish_in_background();
    Renewed {
        replies: decided.replies,
        generations,
    }
}

/// A renewal may land the moment it is sent: until it is answered, each
/// lock counts with its ttl as unknown on every node it goes to
/// (docs/protocol.md §4.5).
fn count_as_under_way(nodes: &NodeSet, renewing: &[Renewing], generations: &[Option<u32>], sent: Instant) {
    for item in renewing {
        let mut timing = item.lock.timing();
        if timing.job == Some(item.key) {
            let under_way = generations.iter().map(|generation| outcome(*generation, None));
            timing.record(nodes, sent, item.ttl, under_way);
        }
    }
}

/// `EXTEND` for every lock of the batch, as `EVAL` commands: a ttl change
/// is never sent twice (see [`crate::node::Prepared::ttl_change`]).
fn renewal_pipeline(renewing: &[Renewing]) -> redis::Pipeline {
    let mut ttl_ms = String::new();
    let mut last_ttl = None;
    let mut pipe = pipeline();
    for Renewing { lock, ttl, .. } in renewing {
        // Locks of one batch usually share a ttl: format it once.
        if last_ttl != Some(*ttl) {
            ttl_ms = ttl.as_millis().to_string();
            last_ttl = Some(*ttl);
        }
        pipe.add_command(eval_cmd(
            &scripts::EXTEND,
            lock.extend_keys().list(),
            &[lock.token.as_str(), &ttl_ms],
        ));
    }
    pipe
}

/// Applies one lock's renewal replies: renewed, lost, or retry.
fn settle(
    nodes: &NodeSet,
    schedule: &Weak<Schedule>,
    item: &Renewing,
    renewed: &Renewed,
    index: usize,
    sent: Instant,
) {
    let lock = &item.lock;
    let replies: Vec<Option<Reply>> = (0..nodes.nodes().len())
        .map(|node| renewed.reply(node, index))
        .collect();
    let outcomes = renewed
        .generations
        .iter()
        .zip(&replies)
        .map(|(generation, reply)| outcome(*generation, reply.as_ref()));
    let (done, not_ours, taken) = tally(replies.iter().map(Option::as_ref));
    let quorum = nodes.quorum();
    {
        let mut timing = lock.timing();
        if timing.job != Some(item.key) {
            return; // dropped meanwhile: no further renewal
        }
        let valid = timing.record(nodes, sent, item.ttl, outcomes);
        if quorum.reached(done) && valid {
            timing.renewals += 1;
            drop(timing);
            lock.metrics.renewed(true);
            tracing::trace!(resource = %lock.resource(), "lock renewed");
            replan(schedule, lock);
            return;
        }
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
        .zip(&replies)
        .filter_map(|(node, reply)| match reply {
            Some(Err(outcome)) => Some(format!("{}: {outcome}", node.endpoint())),
            None => Some(format!("{}: {}", node.endpoint(), NodeOutcome::Pending)),
            Some(Ok(_)) => None,
        })
        .collect();
    lock.metrics.renewed(false);
    tracing::warn!(resource = %lock.resource(), renewed_on = done, ?failures, "renewal failed; retrying");
    if let Some(schedule) = schedule.upgrade() {
        schedule.retry(lock, item.key, item.ttl);
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;
    use crate::keys::LockKeys;
    use crate::options::RenewalPolicy;
    use crate::token::LockToken;

    fn schedule() -> Schedule {
        Schedule {
            jobs: Mutex::new(Jobs::default()),
            seq: AtomicU64::new(0),
            wake: Arc::new(Notify::new()),
        }
    }

    fn held_lock(resource: &str, ttl: Duration) -> Arc<LockState> {
        let options = crate::options::Resolved {
            ttl,
            wait: Duration::ZERO,
            renewal: RenewalPolicy {
                auto: true,
                max_hold: None,
                max_renewals: None,
            },
            fair: false,
        };
        let now = Instant::now();
        Arc::new(LockState::new(
            LockKeys::new("test:", resource).unwrap(),
            LockToken::generate().unwrap(),
            crate::Fence::bare(1),
            &options,
            crate::lease::Leases::granted([true], now, ttl),
            now + ttl,
            Arc::default(),
        ))
    }

    /// Whether the renewal task has a wake-up pending (consumes it).
    fn woken(schedule: &Schedule) -> bool {
        schedule.wake.notified().now_or_never().is_some()
    }

    #[test]
    fn the_first_job_wakes_the_idle_task() {
        let schedule = schedule();
        schedule.take_due(Instant::now());
        schedule.plan(&held_lock("a", Duration::from_secs(3)));
        assert!(woken(&schedule));
    }

    #[test]
    fn short_lived_locks_do_not_wake_the_sleeping_task() {
        let schedule = schedule();
        let ttl = Duration::from_secs(3);
        let first = held_lock("first", ttl);
        schedule.plan(&first);
        // The task looks at the schedule and sleeps until the first renewal.
        let (due, _) = schedule.take_due(Instant::now());
        assert!(due.is_empty());
        let _ = woken(&schedule);
        // Lock after lock is taken and released, each due after that renewal:
        // the queue empties and refills, but the task's wake-up is early enough.
        schedule.cancel(&first);
        for i in 0..100 {
            let lock = held_lock(&format!("short{i}"), ttl);
            schedule.plan(&lock);
            schedule.cancel(&lock);
        }
        assert!(
            !woken(&schedule),
            "a job due after the task's wake-up needs no wake-up"
        );
    }

    #[test]
    fn a_job_due_before_the_wake_up_wakes_the_task() {
        let schedule = schedule();
        schedule.plan(&held_lock("long", Duration::from_secs(30)));
        schedule.take_due(Instant::now());
        let _ = woken(&schedule);
        schedule.plan(&held_lock("short", Duration::from_millis(300)));
        assert!(woken(&schedule), "the task would sleep past the new renewal");
    }
}

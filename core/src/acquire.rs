//! Taking a lock or a semaphore's permit: one attempt on every node, and
//! the retry loop around it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::claim::{Claim, NodeGrant, Request, by_slot_quorum, winner};
use crate::error::{Error, ErrorKind, NodeFailure, NodeOutcome, Result, quorum_failure_kind};
use crate::fenced::{Fence, new_holder_id};
use crate::fencing::{FencingToken, raise_to};
use crate::keys::LockKeys;
use crate::lease::Leases;
use crate::linger::{Adopted, Linger};
use crate::lock::{Lock, Unclaimed};
use crate::lock_state::LockState;
use crate::node::{Reply, as_i64};
use crate::node_set::NodeSet;
use crate::options::{LockOptions, Resolved};
use crate::queue::{Entry, Place, Refusal};
use crate::quorum::Decided;
use crate::runtime;
use crate::shared::ClientShared;
use crate::token::LockToken;
use crate::waiter::Waiter;

/// A successful attempt.
struct Grant {
    /// What it holds.
    keys: LockKeys,
    token: LockToken,
    fencing_token: u64,
    /// The grant's id for fenced writes.
    holder: u64,
    /// Which nodes granted, and when.
    leases: Leases,
    valid_until: Instant,
    /// The acquire requests still on their way to the slower nodes.
    stragglers: Option<JoinHandle<()>>,
    /// What the nodes that refused said of the waiter's place.
    place: Place,
}

/// A failed attempt: its error, what the nodes said of the waiter's place
/// in the queue, and the undo of what it was granted, still under way.
struct Refused {
    error: Error,
    place: Place,
    undo: Option<JoinHandle<()>>,
}

impl From<Error> for Refused {
    fn from(error: Error) -> Self {
        Refused {
            error,
            place: Place::default(),
            undo: None,
        }
    }
}

/// What every `acquire` of the public API does: waits for the client's
/// connections, checks the options, and runs [`acquire`] on the core's
/// runtime (or the caller's), in a tracing span.
pub(crate) async fn claim(
    client: &Arc<ClientShared>,
    claim: Result<Claim>,
    options: LockOptions,
) -> Result<Lock> {
    // The name is only kept (an allocation) for per-resource labels.
    let resource = match client.metrics.per_resource() {
        true => claim.as_ref().map_or("", Claim::name).to_owned(),
        false => String::new(),
    };
    let mut counted = Counted::start(client, resource);
    let result = async {
        let claim = claim?;
        client.ready().await?;
        let options = options.resolve(&client.defaults)?;
        let span =
            tracing::debug_span!("acquire", resource = %claim.name(), ttl_ms = options.ttl.as_millis() as u64);
        // Boxed: the attempt's state machine is large, and moving it through the
        // layers of futures costs more than one allocation. Unclaimed until
        // here: off a tokio runtime the attempt runs on the core's, and a
        // caller that stopped waiting after the grant came drops it with the
        // task's output, which then releases the lock instead of leaving it
        // to block the resource until its ttl.
        let attempt = acquire(client.clone(), claim, options).instrument(span);
        let granted = runtime::run(Box::pin(async { attempt.await.map(Unclaimed::new) })).await??;
        Ok(granted.claim())
    }
    .await;
    counted.ended(result.as_ref().err().map(Error::kind));
    result
}

/// Counts one acquire call in the client's metrics when it ends; dropped
/// before that (the caller stopped waiting), as cancelled.
struct Counted<'a> {
    client: &'a ClientShared,
    resource: String,
    started: Instant,
    done: bool,
}

impl<'a> Counted<'a> {
    fn start(client: &'a ClientShared, resource: String) -> Self {
        Counted {
            client,
            resource,
            started: Instant::now(),
            done: false,
        }
    }

    fn ended(&mut self, failed: Option<ErrorKind>) {
        self.done = true;
        let metrics = &self.client.metrics;
        metrics.acquire_ended(&self.resource, self.started.elapsed(), failed);
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if !self.done {
            let (metrics, took) = (&self.client.metrics, self.started.elapsed());
            metrics.acquire_ended(&self.resource, took, Some(ErrorKind::Cancelled));
        }
    }
}

/// A single try's result: `None` when it was refused.
pub(crate) fn none_if_refused(result: Result<Lock>) -> Result<Option<Lock>> {
    match result {
        Ok(lock) => Ok(Some(lock)),
        Err(err) if err.kind() == ErrorKind::NotAcquired => Ok(None),
        Err(err) => Err(err),
    }
}

/// Retries until the lock is taken or `options.wait` has passed. A call
/// that may wait queues up with its attempts and sleeps until a release
/// wakes it, or until what blocks the lock may have expired
/// ([`crate::waiter`]); without wake-ups it polls by the retry policy.
pub(crate) async fn acquire(client: Arc<ClientShared>, claim: Claim, options: Resolved) -> Result<Lock> {
    let started = Instant::now();
    let deadline = started + options.wait;
    // A lingering release of this client's is taken back with the waiter
    // id it reserved the key for; a waiter then even with no wait, so that
    // a refused attempt leaves the queues it entered. Never in fair mode,
    // which takes no lock ahead of a waiter: the release is handed on.
    let adopted = if options.fair {
        None
    } else {
        client.lingers.adopt(&claim)
    };
    let (retake, mut waiter) = match adopted {
        Some(Adopted {
            key,
            retakes,
            reserved,
        }) => (
            Some((key, retakes)),
            Some(Waiter::adopting(&client, claim.leave(), reserved)),
        ),
        None => (
            None,
            (!options.wait.is_zero()).then(|| Waiter::new(&client, claim.leave())),
        ),
    };
    let mut retry = 0u32;
    let mut undoing: Option<JoinHandle<()>> = None;
    loop {
        if let Some(undo) = undoing.take() {
            // The next attempt must not overtake the last one's undo: a node
            // would refuse it for the grant that is about to be taken back,
            // and nothing would tell the waiter once it was. Not for longer
            // than a node may take to answer, nor past the deadline: an undo
            // waiting for a node that is down must not hold up the others.
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = tokio::time::timeout(client.nodes.request_timeout().min(left), undo).await;
        }
        if let Some(waiter) = &mut waiter {
            waiter.attempting();
        }
        let mut entry = match &waiter {
            Some(waiter) => waiter.entry(options.fair),
            None => Entry {
                waiter: None,
                ticket: 0,
                fair: options.fair,
                prefer: None,
                retake: false,
            },
        };
        if retry == 0 && retake.is_some() {
            entry.retake = true;
            if matches!(claim, Claim::Permit(_)) {
                // The permit reserved for this waiter: the one to take back.
                entry.prefer = retake.as_ref().map(|(key, _)| key.clone());
            }
        }
        let outcome = attempt(&client.nodes, &claim, options.ttl, client.connect_timeout, &entry).await;
        match outcome {
            Ok(grant) => {
                if let Some(waiter) = &mut waiter {
                    waiter.granted(&grant.place);
                }
                tracing::debug!(resource = %claim.name(), fencing_token = grant.fencing_token, attempts = retry + 1, "lock acquired");
                let taken_back = retake.filter(|_| retry == 0).map(|(_, retakes)| retakes);
                let linger = lingering(&client, &claim, &grant, &options, (retry, started), taken_back);
                return Ok(hand_out(&client, grant, &options, linger));
            }
            Err(Refused { error, place, undo }) if is_retryable(error.kind()) => {
                undoing = undo;
                let now = Instant::now();
                if now >= deadline {
                    stop_waiting(waiter).await;
                    return Err(gave_up(error, &claim, options.wait));
                }
                let pause = waiter.as_mut().and_then(|waiter| {
                    waiter.refused(place);
                    waiter.pause()
                });
                let pause = pause
                    .unwrap_or_else(|| client.retry.delay(retry))
                    .min(deadline - now);
                retry = retry.saturating_add(1);
                match &mut waiter {
                    Some(waiter) => waiter.sleep(pause, options.fair).await,
                    None => tokio::time::sleep(pause).await,
                }
            }
            Err(Refused { error, .. }) => {
                stop_waiting(waiter).await;
                return Err(error);
            }
        }
    }
}

/// Takes a waiter that will not be granted out of the queues before its
/// error is reported ([`Waiter::give_up`]).
async fn stop_waiting(waiter: Option<Waiter>) {
    if let Some(waiter) = waiter {
        waiter.give_up().await;
    }
}

fn is_retryable(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::NotAcquired | ErrorKind::Unavailable)
}

/// The error after the last attempt: as is for a single try, `Timeout` after waiting.
fn gave_up(last: Error, claim: &Claim, wait: Duration) -> Error {
    if wait.is_zero() {
        return last;
    }
    Error::new(
        ErrorKind::Timeout,
        format!(
            "could not acquire {} within {wait:?}; last attempt: {}",
            claim.describe(),
            last.message()
        ),
    )
    .with_resource(claim.name())
    .with_nodes(last.nodes().to_vec())
}

/// What the release of `grant` needs to linger ([`crate::linger`]), for a
/// lock or a semaphore's permit (not a read-write lock) in the default
/// mode: it may linger when the grant took the key back from this client's
/// own lingering release on its first attempt (`taken_back`, the re-takes
/// in a row), or when this client had to wait for it (`refused` attempts
/// before the grant) and loops (the acquire began right after its last
/// release of it, at `started`). An uncontended grant carries nothing: its
/// release is not counted as a loop's, so the hot path allocates nothing
/// for re-takes, and a loop is found one contended cycle later.
fn lingering(
    client: &ClientShared,
    claim: &Claim,
    grant: &Grant,
    options: &Resolved,
    (refused, started): (u32, Instant),
    taken_back: Option<u32>,
) -> Option<Linger> {
    let claim_key = match claim {
        Claim::Lock(keys) => keys.lock(),
        Claim::Permit(keys) => keys.size(),
        Claim::Read(_) | Claim::Write(_) => return None,
    };
    if options.fair || (refused == 0 && taken_back.is_none()) {
        return None;
    }
    let loops = || refused > 0 && client.lingers.loops(claim_key, started);
    Some(Linger {
        keys: grant.keys.clone(),
        claim: claim_key.to_owned(),
        retakes: taken_back.or_else(|| loops().then_some(0)),
    })
}

fn hand_out(client: &Arc<ClientShared>, grant: Grant, options: &Resolved, linger: Option<Linger>) -> Lock {
    let mut state = LockState::new(
        grant.keys,
        grant.token,
        Fence {
            token: grant.fencing_token,
            holder: grant.holder,
        },
        options,
        grant.leases,
        grant.valid_until,
        client.metrics.clone(),
    );
    state.linger = linger;
    let state = Arc::new(state);
    state.keep_stragglers(grant.stragglers);
    client.watchdog.plan(&state);
    Lock::new(state, client.clone())
}

/// One attempt: the acquire script on every node in parallel, decided by quorum.
async fn attempt(
    nodes: &Arc<NodeSet>,
    claim: &Claim,
    ttl: Duration,
    patience: Duration,
    entry: &Entry<'_>,
) -> std::result::Result<Grant, Refused> {
    let token = LockToken::generate()?;
    let request = claim.request(nodes, &token, ttl, entry)?;
    let mut cleanup = Cleanup::new(nodes, claim, &request, &token, patience);
    let sent = Instant::now();
    let quorum = nodes.quorum();
    let Decided { replies, stragglers } = {
        let rule = by_slot_quorum(claim, &request, nodes.nodes().len(), quorum.needed());
        nodes.send_until(request.prepared(), rule).await
    };
    cleanup.skip_refusals(&replies);
    let place = Place::from_replies(&replies);
    if let Some(error) = size_mismatch(nodes, claim, &replies) {
        return Err(Refused::from(error));
    }
    let grants: Vec<Option<NodeGrant>> = replies
        .iter()
        .map(|r| r.as_ref().and_then(|r| claim.read_grant(&request, r)))
        .collect();
    let Some((slot, counters)) = winner(&grants, quorum.needed()) else {
        return Err(Refused {
            error: refusal(nodes, claim, &replies),
            place,
            undo: cleanup.undo(),
        });
    };
    let fencing_token = FencingToken::from_grants(&counters).expect("a quorum granted, so a counter exists");
    if !fencing_token.ready(quorum)
        && let Err(raise_replies) = raise_to(nodes, claim.fence(), &fencing_token).await
    {
        let reports = nodes.reports(&raise_replies, |_| NodeOutcome::Ok);
        // With its undo, which the next attempt must not overtake, and the
        // place the nodes gave a waiter, as for any other refusal.
        return Err(Refused {
            error: Error::new(
                ErrorKind::Unavailable,
                format!(
                    "{} was granted but its fencing counter could not be raised on a majority \
                 of the nodes that granted it (docs/protocol.md section 4.4); the attempt was undone",
                    claim.describe()
                ),
            )
            .with_resource(claim.name())
            .with_nodes(reports),
            place,
            undo: cleanup.undo(),
        });
    }
    let Some(valid_until) = nodes.valid_until(sent, ttl) else {
        return Err(Refused {
            place,
            error: Error::new(
                ErrorKind::Unavailable,
                format!(
                    "{} was granted too slowly: {:?} of its {ttl:?} ttl had passed, leaving no validity; \
                 raise the ttl or look at node latency",
                    claim.describe(),
                    sent.elapsed()
                ),
            )
            .with_resource(claim.name()),
            undo: cleanup.undo(),
        });
    };
    cleanup.succeeded(slot, &counters);
    drop(cleanup);
    let leases = Leases::granted(counters.iter().map(Option::is_some), sent, ttl);
    // Granted: the nodes that had not answered get the lock too, so it
    // survives more node failures than the bare majority would; one that
    // refused queued the waiter, which then leaves it.
    let stragglers = match entry.waiter {
        Some(waiter) => stragglers.finish_each(
            || (),
            claim
                .leave()
                .where_late_refused(nodes.clone(), waiter.to_owned(), place.pending),
        ),
        None => stragglers.finish_in_background(),
    };
    Ok(Grant {
        keys: claim.held(&request, slot),
        place,
        token,
        fencing_token: fencing_token.value(),
        holder: new_holder_id()?,
        leases,
        valid_until,
        stragglers,
    })
}

/// A semaphore whose nodes store another number of permits than ours: a
/// configuration error, reported as such.
fn size_mismatch(nodes: &NodeSet, claim: &Claim, replies: &[Option<Reply>]) -> Option<Error> {
    let (index, stored) = replies.iter().enumerate().find_map(|(i, reply)| {
        let value = reply.as_ref()?.as_ref().ok()?;
        Some((i, claim.size_mismatch(value)?))
    })?;
    let node = nodes.nodes()[index].endpoint();
    Some(
        Error::invalid(format!(
            "{} does not match the semaphore in use on {node}, which has {stored} permits: every client \
             of a semaphore must give the same number while it is in use; the stored number lapses once \
             no permit has been asked for within a ttl",
            claim.describe()
        ))
        .with_resource(claim.name()),
    )
}

fn describe_acquire(claim: &Claim, value: &redis::Value) -> NodeOutcome {
    if Refusal::read(value).is_some() {
        return NodeOutcome::HeldByOther;
    }
    if let Some(n) = claim.counter_out_of_range(value) {
        return NodeOutcome::Failed(NodeFailure {
            kind: ErrorKind::Unavailable,
            detail: format!(
                "the fencing counter reached {n}, above 2^53 - 1 where tokens could repeat; \
                 see docs/protocol.md section 2.2"
            ),
        });
    }
    let granted = match claim {
        Claim::Lock(_) | Claim::Read(_) | Claim::Write(_) => as_i64(value).is_some_and(|n| n >= 1),
        Claim::Permit(_) => {
            matches!(value, redis::Value::Array(items) if items.len() == 3 && as_i64(&items[0]) == Some(1))
        }
    };
    match value {
        _ if granted => NodeOutcome::Ok,
        redis::Value::Int(0) => NodeOutcome::HeldByOther,
        _ => NodeOutcome::unexpected_reply(value),
    }
}

/// The error for an attempt without a majority: held by another, granted
/// split across a semaphore's permits, or the nodes' failure.
fn refusal(nodes: &NodeSet, claim: &Claim, replies: &[Option<Reply>]) -> Error {
    let reports = nodes.reports(replies, |value| describe_acquire(claim, value));
    let count = |outcome: fn(&NodeOutcome) -> bool| reports.iter().filter(|r| outcome(&r.outcome)).count();
    let held = count(|o| *o == NodeOutcome::HeldByOther);
    let granted = count(|o| *o == NodeOutcome::Ok);
    let failures = count(|o| matches!(o, NodeOutcome::TimedOut | NodeOutcome::Failed(_)));
    let total = nodes.nodes().len();
    let needed = nodes.quorum().needed();
    let (kind, message) = if held > 0 && held >= failures {
        (
            ErrorKind::NotAcquired,
            format!("{} ({held} of {total} nodes said so)", claim.held_elsewhere()),
        )
    } else if granted > failures {
        (
            ErrorKind::NotAcquired,
            format!(
                "{granted} of {total} nodes granted {}, but no {needed} of them the same permit",
                claim.describe()
            ),
        )
    } else {
        (
            quorum_failure_kind(&reports),
            format!(
                "could not reach a majority for {}: {failures} of {total} nodes failed or timed out, \
                 {needed} must answer; check that the nodes are up and reachable",
                claim.describe()
            ),
        )
    };
    Error::new(kind, message)
        .with_resource(claim.name())
        .with_nodes(reports)
}

/// Undoes an attempt that did not hand out a lock, on every node that may
/// hold its token: late replies, timeouts and cancellation included.
/// Borrows until it has to act, so a successful lock attempt costs nothing.
struct Cleanup<'a> {
    nodes: &'a Arc<NodeSet>,
    claim: &'a Claim,
    request: &'a Request,
    token: &'a LockToken,
    /// Bit `i` set: node `i` needs no undo (it refused, so it holds nothing
    /// of ours, or it granted the permit the attempt won).
    skip: u128,
    /// The semaphore's permit the attempt won, which stays.
    keep: Option<usize>,
    /// How long the undo may wait for a node's connection to come back.
    patience: Duration,
    armed: bool,
}

impl<'a> Cleanup<'a> {
    fn new(
        nodes: &'a Arc<NodeSet>,
        claim: &'a Claim,
        request: &'a Request,
        token: &'a LockToken,
        patience: Duration,
    ) -> Self {
        Cleanup {
            nodes,
            claim,
            request,
            token,
            skip: 0,
            keep: None,
            patience,
            armed: true,
        }
    }

    fn skip_refusals(&mut self, replies: &[Option<Reply>]) {
        for (i, reply) in replies.iter().enumerate().take(128) {
            if matches!(reply, Some(Ok(value)) if Refusal::read(value).is_some()) {
                self.skip |= 1 << i;
            }
        }
    }

    /// The attempt won `slot` on the nodes whose `counters` are `Some`. A
    /// lock keeps every grant, late ones too; a semaphore's nodes that
    /// granted another permit, or may still (they failed or had not
    /// answered), give that one back.
    fn succeeded(&mut self, slot: usize, counters: &[Option<u64>]) {
        if !matches!(self.claim, Claim::Permit(_)) {
            self.armed = false;
            return;
        }
        for (i, counter) in counters.iter().enumerate().take(128) {
            if counter.is_some() {
                self.skip |= 1 << i;
            }
        }
        if self.skip.count_ones() as usize >= counters.len().min(128) {
            self.armed = false;
        }
        self.keep = Some(slot);
    }
}

impl Cleanup<'_> {
    /// Undoes the attempt now; returns the task doing it.
    fn undo(mut self) -> Option<JoinHandle<()>> {
        self.undo_once()
    }

    fn undo_once(&mut self) -> Option<JoinHandle<()>> {
        if !std::mem::replace(&mut self.armed, false) {
            return None;
        }
        // Runs on the internal runtime even when the attempt was cancelled; the
        // undo travels behind the acquire on each connection, so it lands
        // after it. Where that connection broke, it waits for the next one.
        let skip = self.skip;
        self.claim.undo_in_background(
            self.nodes,
            self.request,
            self.token,
            self.keep,
            self.patience,
            move |i| !(i < 128 && skip & (1 << i) != 0),
        )
    }
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        self.undo_once();
    }
}

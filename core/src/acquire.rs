//! Taking a lock: one attempt on every node, and the retry loop around it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::error::{Error, ErrorKind, NodeFailure, NodeOutcome, Result, quorum_failure_kind};
use crate::fenced::{Fence, new_holder_id};
use crate::fencing::{FencingToken, MAX_FENCING_TOKEN, raise_to};
use crate::keys::LockKeys;
use crate::lease::Leases;
use crate::lock::Lock;
use crate::lock_state::LockState;
use crate::node::{Reply, as_i64};
use crate::node_set::NodeSet;
use crate::options::Resolved;
use crate::queue::{self, Entry, Place, Refusal, Release};
use crate::quorum::Decided;
use crate::scripts;
use crate::shared::ClientShared;
use crate::token::LockToken;
use crate::waiter::Waiter;

/// A successful attempt.
struct Grant {
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

/// A failed attempt: its error, and what the nodes said of the waiter's
/// place in the queue.
struct Refused {
    error: Error,
    place: Place,
}

impl From<Error> for Refused {
    fn from(error: Error) -> Self {
        Refused {
            error,
            place: Place::default(),
        }
    }
}

/// Retries until the lock is taken or `options.wait` has passed. A call
/// that may wait queues up with its attempts and sleeps until a release
/// wakes it, or until what blocks the lock may have expired
/// ([`crate::waiter`]); without wake-ups it polls by the retry policy.
pub(crate) async fn acquire(client: Arc<ClientShared>, resource: String, options: Resolved) -> Result<Lock> {
    let keys = LockKeys::new(&client.key_prefix, &resource)?;
    let started = Instant::now();
    let deadline = started + options.wait;
    let mut waiter = (!options.wait.is_zero()).then(|| Waiter::new(&client, keys.lock()));
    let mut retry = 0u32;
    loop {
        if let Some(waiter) = &mut waiter {
            waiter.attempting();
        }
        let entry = match &waiter {
            Some(waiter) => waiter.entry(options.fair),
            None => Entry {
                waiter: None,
                ticket: 0,
                fair: options.fair,
            },
        };
        let outcome = attempt(
            &client.nodes,
            &keys,
            &resource,
            options.ttl,
            client.connect_timeout,
            &entry,
        )
        .await;
        match outcome {
            Ok(grant) => {
                if let Some(waiter) = &mut waiter {
                    waiter.granted(&grant.place);
                }
                tracing::debug!(resource = %resource, fencing_token = grant.fencing_token, attempts = retry + 1, "lock acquired");
                return Ok(hand_out(&client, keys, grant, &options));
            }
            Err(Refused { error, place }) if is_retryable(error.kind()) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(gave_up(error, &resource, options.wait));
                }
                let pause = waiter.as_mut().and_then(|waiter| {
                    waiter.refused(place);
                    waiter.pause()
                });
                let pause = pause
                    .unwrap_or_else(|| client.retry.delay(retry))
                    .min(deadline - now);
                retry = retry.saturating_add(1);
                match &waiter {
                    Some(waiter) => waiter.sleep(pause).await,
                    None => tokio::time::sleep(pause).await,
                }
            }
            Err(Refused { error, .. }) => return Err(error),
        }
    }
}

fn is_retryable(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::NotAcquired | ErrorKind::Unavailable)
}

/// The error after the last attempt: as is for a single try, `Timeout` after waiting.
fn gave_up(last: Error, resource: &str, wait: Duration) -> Error {
    if wait.is_zero() {
        return last;
    }
    Error::new(
        ErrorKind::Timeout,
        format!(
            "could not acquire lock '{resource}' within {wait:?}; last attempt: {}",
            last.message()
        ),
    )
    .with_resource(resource)
    .with_nodes(last.nodes().to_vec())
}

fn hand_out(client: &Arc<ClientShared>, keys: LockKeys, grant: Grant, options: &Resolved) -> Lock {
    let state = Arc::new(LockState::new(
        keys,
        grant.token,
        Fence {
            token: grant.fencing_token,
            holder: grant.holder,
        },
        options.ttl,
        grant.leases,
        grant.valid_until,
        options.renewal,
    ));
    state.keep_stragglers(grant.stragglers);
    client.watchdog.plan(&state);
    Lock::new(state, client.clone())
}

/// One attempt: the acquire script on every node in parallel, decided by quorum.
async fn attempt(
    nodes: &Arc<NodeSet>,
    keys: &LockKeys,
    resource: &str,
    ttl: Duration,
    patience: Duration,
    entry: &Entry<'_>,
) -> std::result::Result<Grant, Refused> {
    let token = LockToken::generate()?;
    let ttl_ms = ttl.as_millis().to_string();
    let [waiter, ticket, lease, fair] = entry.args();
    let mut cleanup = Cleanup::new(nodes, keys.lock(), &token, patience);
    let sent = Instant::now();
    let Decided { replies, stragglers } = nodes
        .decide(
            &scripts::ACQUIRE,
            &keys.acquire_keys(),
            &[token.as_str(), &ttl_ms, &waiter, &ticket, &lease, &fair],
            |reply| granted(reply).is_some(),
        )
        .await;
    cleanup.skip_refusals(&replies);
    let place = Place::from_replies(&replies);
    let counters: Vec<Option<u64>> = replies.iter().map(|r| r.as_ref().and_then(granted)).collect();
    let quorum = nodes.quorum();
    let fencing_token = match FencingToken::from_grants(&counters) {
        Some(token) if quorum.reached(counters.iter().flatten().count()) => token,
        _ => {
            return Err(Refused {
                error: refusal(nodes, &replies, resource),
                place,
            });
        }
    };
    if !fencing_token.ready(quorum)
        && let Err(raise_replies) = raise_to(nodes, keys.fence(), &fencing_token).await
    {
        let reports = nodes.reports(&raise_replies, |_| NodeOutcome::Ok);
        return Err(Refused::from(
            Error::new(
                ErrorKind::Unavailable,
                format!(
                    "lock '{resource}' was granted but its fencing counter could not be raised on a majority \
                 of the nodes that granted it (docs/protocol.md section 4.4); the attempt was undone"
                ),
            )
            .with_resource(resource)
            .with_nodes(reports),
        ));
    }
    let Some(valid_until) = nodes.valid_until(sent, ttl) else {
        return Err(Refused {
            place,
            error: Error::new(
            ErrorKind::Unavailable,
            format!(
                "lock '{resource}' was granted too slowly: {:?} of its {ttl:?} ttl had passed, leaving no validity; \
                 raise the ttl or look at node latency",
                sent.elapsed()
            ),
        )
        .with_resource(resource),
        });
    };
    cleanup.disarm();
    drop(cleanup);
    let leases = Leases::granted(counters.iter().map(Option::is_some), sent, ttl);
    // Granted: the nodes that had not answered get the lock too, so it
    // survives more node failures than the bare majority would; one that
    // refused queued the waiter, which then leaves it.
    let stragglers = match entry.waiter {
        Some(waiter) => stragglers.finish_each(
            || (),
            queue::leave_where_late_refused(nodes.clone(), keys.lock().to_owned(), waiter.to_owned()),
        ),
        None => stragglers.finish_in_background(),
    };
    Ok(Grant {
        place,
        token,
        fencing_token: fencing_token.value(),
        holder: new_holder_id()?,
        leases,
        valid_until,
        stragglers,
    })
}

/// The fencing counter a node returned when it granted the lock.
fn granted(reply: &Reply) -> Option<u64> {
    let n = as_i64(reply.as_ref().ok()?)?;
    u64::try_from(n)
        .ok()
        .filter(|n| (1..=MAX_FENCING_TOKEN).contains(n))
}

fn describe_acquire(value: &redis::Value) -> NodeOutcome {
    if Refusal::read(value).is_some() {
        return NodeOutcome::HeldByOther;
    }
    match as_i64(value) {
        Some(0) => NodeOutcome::HeldByOther,
        Some(n) if (1..=MAX_FENCING_TOKEN as i64).contains(&n) => NodeOutcome::Ok,
        Some(n) if n > MAX_FENCING_TOKEN as i64 => NodeOutcome::Failed(NodeFailure {
            kind: ErrorKind::Unavailable,
            detail: format!(
                "the fencing counter reached {n}, above 2^53 - 1 where tokens could repeat; \
                 see docs/protocol.md section 2.2"
            ),
        }),
        _ => NodeOutcome::unexpected_reply(value),
    }
}

/// The error for an attempt without a majority: held by another, or the nodes' failure.
fn refusal(nodes: &NodeSet, replies: &[Option<Reply>], resource: &str) -> Error {
    let reports = nodes.reports(replies, describe_acquire);
    let held = reports
        .iter()
        .filter(|r| r.outcome == NodeOutcome::HeldByOther)
        .count();
    let failures = reports
        .iter()
        .filter(|r| matches!(r.outcome, NodeOutcome::TimedOut | NodeOutcome::Failed(_)))
        .count();
    let total = nodes.nodes().len();
    let needed = nodes.quorum().needed();
    let (kind, message) = if held > 0 && held >= failures {
        (
            ErrorKind::NotAcquired,
            format!(
                "lock '{resource}' is held by another owner or kept for a waiter ahead in line \
                 ({held} of {total} nodes said so)"
            ),
        )
    } else {
        (
            quorum_failure_kind(&reports),
            format!(
                "could not reach a majority for lock '{resource}': {} of {total} nodes failed or timed out, \
                 {needed} must answer; check that the nodes are up and reachable",
                failures
            ),
        )
    };
    Error::new(kind, message)
        .with_resource(resource)
        .with_nodes(reports)
}

/// Undoes an attempt that did not hand out a lock, on every node that may
/// hold its token: late replies, timeouts and cancellation included.
/// Borrows until it has to act, so a successful attempt costs nothing.
struct Cleanup<'a> {
    nodes: &'a Arc<NodeSet>,
    lock_key: &'a str,
    token: &'a LockToken,
    /// Bit `i` set: node `i` refused (held by another), so it holds nothing of ours.
    refused: u128,
    /// How long the undo may wait for a node's connection to come back.
    patience: Duration,
    armed: bool,
}

impl<'a> Cleanup<'a> {
    fn new(nodes: &'a Arc<NodeSet>, lock_key: &'a str, token: &'a LockToken, patience: Duration) -> Self {
        Cleanup {
            nodes,
            lock_key,
            token,
            refused: 0,
            patience,
            armed: true,
        }
    }

    fn skip_refusals(&mut self, replies: &[Option<Reply>]) {
        for (i, reply) in replies.iter().enumerate().take(128) {
            if matches!(reply, Some(Ok(value)) if Refusal::read(value).is_some()) {
                self.refused |= 1 << i;
            }
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Runs on the internal runtime even when the attempt was cancelled; the
        // release travels behind the acquire on each connection, so it lands
        // after it. Where that connection broke, it waits for the next one.
        let refused = self.refused;
        queue::release_in_background(
            self.nodes,
            self.lock_key,
            self.token,
            Release::Undo,
            self.patience,
            move |i| !(i < 128 && refused & (1 << i) != 0),
        );
    }
}

//! The lock handle returned by `acquire`: extend, release, and the lost signal.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::compare_and_act::{CompareAndAct, compare_and_act, describe_compare_and_act};
use crate::error::{Error, ErrorKind, Result, quorum_failure_kind};
use crate::fenced::Fence;
use crate::finishing::finishing;
use crate::keys::HeldKind;
use crate::lock_state::{LockState, LockStatus, LossReason};
use crate::node::Reply;
use crate::node_set::{NodeSet, tally};
use crate::options::validate_ttl;
use crate::queue::{self, Release};
use crate::runtime;
use crate::scripts::{self, LuaScript};
use crate::shared::ClientShared;
use crate::token::LockToken;

/// A held lock.
///
/// Dropping it stops the watchdog without blocking and without network I/O;
/// the key then expires on Redis at its ttl. Call [`Lock::release`] to free
/// the lock at once.
///
/// ```no_run
/// # async fn demo(client: fencelock::Client) -> fencelock::Result<()> {
/// use std::time::Duration;
/// use fencelock::LockOptions;
///
/// let lock = client
///     .acquire("orders:42", LockOptions::new(Duration::from_secs(10)).wait(Duration::from_secs(2)))
///     .await?;
/// let token = lock.fencing_token(); // pass it to the storage you protect
/// tokio::select! {
///     _ = do_work(token) => {}
///     reason = lock.lost() => eprintln!("stopped: {reason}"),
/// }
/// lock.release().await?;
/// # Ok(()) }
/// # async fn do_work(_: u64) {}
/// ```
pub struct Lock {
    state: Arc<LockState>,
    client: Arc<ClientShared>,
}

impl Lock {
    pub(crate) fn new(state: Arc<LockState>, client: Arc<ClientShared>) -> Self {
        Lock { state, client }
    }

    /// The owner's token and the lock key, for scripts that act only while
    /// this lock is held (an election's announcement).
    pub(crate) fn identity(&self) -> (String, String) {
        (
            self.state.token.as_str().to_owned(),
            self.state.lock_key().to_owned(),
        )
    }

    /// The resource this lock protects.
    pub fn resource(&self) -> &str {
        self.state.resource()
    }

    /// For a semaphore's permit ([`crate::Semaphore::acquire`]): which of
    /// its permits this is, from 0. `None` for a lock.
    pub fn permit(&self) -> Option<u32> {
        match self.state.kind {
            HeldKind::Permit(n) => Some(n),
            _ => None,
        }
    }

    /// The fencing token: strictly greater than that of every earlier holder
    /// of this resource. Pass it with every write to the protected storage.
    pub fn fencing_token(&self) -> u64 {
        self.state.fencing_token
    }

    /// What a fenced write of this holder carries: the fencing token and
    /// this grant's id. Storage accepts it over an equal token only from
    /// this same grant (see [`crate::Client::fenced_set`]).
    pub fn fence(&self) -> Fence {
        Fence {
            token: self.state.fencing_token,
            holder: self.state.holder,
        }
    }

    /// True while the lock is held and its validity (measured on the local
    /// monotonic clock) has not run out.
    pub fn is_held(&self) -> bool {
        self.state.is_held()
    }

    /// How long the lock stays valid without another renewal; zero when not held.
    pub fn remaining(&self) -> Duration {
        self.state.remaining()
    }

    /// Where the lock stands now.
    pub fn status(&self) -> LockStatus {
        self.state.status()
    }

    /// How many times the watchdog has renewed the lock.
    pub fn renewals(&self) -> u32 {
        self.state.timing().renewals
    }

    /// Resolves when the lock is lost (never after a clean release).
    /// Cancel-safe; may be awaited by several tasks.
    pub async fn lost(&self) -> LossReason {
        self.state.wait_lost().await
    }

    /// The work of [`Lock::lost`] as a `'static` future that owns what it
    /// needs, for bindings that spawn it on [`crate::runtime_handle`]. It does
    /// not keep the lock alive: dropping the [`Lock`] stops renewal, and then
    /// this future resolves only if a renewal already in flight finds the
    /// lock gone. Abort it when the handle is released or dropped.
    pub fn lost_task(&self) -> impl Future<Output = LossReason> + Send + 'static {
        let state = self.state.clone();
        async move { state.wait_lost().await }
    }

    /// Sets the lock's ttl to `ttl` from now on a majority of nodes, by
    /// compare-and-pexpire: it never re-creates a missing key. Later
    /// auto-renewals use the new ttl.
    ///
    /// A shorter ttl counts from the moment it is sent, since any node may
    /// apply it at once: [`Lock::remaining`] and [`Lock::is_held`] reflect it
    /// while the call is under way, and after a failed call as long as a
    /// node that did not answer may still apply it (docs/protocol.md §4.5).
    /// Once started, the extend goes on if the caller stops waiting for it
    /// (the future is dropped), so that the watchdog follows the new ttl.
    ///
    /// Errors: [`ErrorKind::Lost`] if the key is gone or owned by another on a
    /// majority (the lock is then marked lost), [`ErrorKind::NotHeld`] after
    /// release, [`ErrorKind::Unavailable`] if too few nodes answered.
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        runtime::run(self.extend_task(ttl)).await?
    }

    /// Checks the arguments of [`Lock::extend`] without sending anything, so a
    /// front can report a bad ttl at the call rather than through its future
    /// (as [`crate::Client::check_request`] does for acquire).
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] for a ttl outside
    /// [`crate::MIN_TTL`]..=[`crate::MAX_TTL`].
    pub fn check_extend(&self, ttl: Duration) -> Result<()> {
        validate_ttl(ttl).map_err(|e| e.with_resource(self.state.resource()))
    }

    /// The work of [`Lock::extend`] as a `'static` future that owns what it
    /// needs, for bindings that spawn it on [`crate::runtime_handle`].
    ///
    /// The extend runs to its end even if the future is dropped before (its
    /// caller stopped waiting, polled or not): its new ttl may reach the
    /// nodes, so the watchdog must be planned from it.
    pub fn extend_task(&self, ttl: Duration) -> impl Future<Output = Result<()>> + Send + 'static {
        let (state, client) = (self.state.clone(), self.client.clone());
        let span =
            tracing::debug_span!("extend", resource = %state.resource(), ttl_ms = ttl.as_millis() as u64);
        let background = client.nodes.background.clone();
        let extend = async move {
            validate_ttl(ttl)?;
            extend(&state, &client, ttl).await
        };
        finishing(extend.instrument(span), background)
    }

    /// Releases the lock on every node by compare-and-delete, and stops the watchdog.
    ///
    /// Returns `Ok` when a majority still held this lock and deleted it, and
    /// [`ErrorKind::NotHeld`] when it had already expired, been taken over,
    /// or been released before (calling twice is safe). Once started, the
    /// release goes on if the caller stops waiting for it (the future is
    /// dropped); [`crate::Client::settle`] waits for it then.
    pub async fn release(&self) -> Result<()> {
        runtime::run(self.release_task()).await?
    }

    /// The work of [`Lock::release`] as a `'static` future that owns what it
    /// needs, for bindings that spawn it on [`crate::runtime_handle`].
    ///
    /// The release runs to its end even if the future is dropped before (its
    /// caller stopped waiting, polled or not): the lock is marked released
    /// before the requests go out, so they must still reach the nodes, and
    /// a lingering release must still hand on the key it reserved.
    /// [`crate::Client::settle`] waits for such a release.
    pub fn release_task(&self) -> impl Future<Output = Result<()>> + Send + 'static {
        let (state, client) = (self.state.clone(), self.client.clone());
        let span = tracing::debug_span!("release", resource = %state.resource());
        let background = client.nodes.background.clone();
        finishing(
            async move { release(&state, &client).await }.instrument(span),
            background,
        )
    }
}

async fn extend(state: &Arc<LockState>, client: &ClientShared, ttl: Duration) -> Result<()> {
    client.ensure_usable()?;
    let _busy = state.busy.lock().await;
    match state.status() {
        LockStatus::Held => {}
        LockStatus::Released => return Err(not_held(state, "was already released")),
        LockStatus::Lost(reason) => {
            return Err(Error::new(
                ErrorKind::Lost,
                format!("{} was lost: {reason}", state.describe()),
            )
            .with_resource(state.resource()));
        }
    }
    let nodes = &client.nodes;
    let sent = Instant::now();
    let ttl_ms = ttl.as_millis().to_string();
    let keys = state.extend_keys();
    let change = nodes
        .decide_ttl_change(
            &scripts::EXTEND,
            keys.list(),
            &[state.token.as_str(), &ttl_ms],
            |r| compare_and_act(r) == Some(CompareAndAct::Done),
            |sending| {
                state.timing().record(nodes, sent, ttl, sending);
            },
        )
        .await;
    // Whatever the outcome, the slower nodes may still apply the new ttl:
    // the validity below counts with that (docs/protocol.md §4.5).
    let valid = state.timing().record(nodes, sent, ttl, change.outcomes());
    let replies = change.decided.replies;
    change.decided.stragglers.finish_in_background();
    let (done, not_ours, taken) = tally(replies.iter().map(Option::as_ref));
    let quorum = nodes.quorum();
    if quorum.reached(done) && valid {
        state.timing().ttl = ttl;
        client.watchdog.plan(state);
        tracing::debug!(resource = %state.resource(), ttl_ms = ttl.as_millis() as u64, "lock extended");
        return Ok(());
    }
    // The validity may have shrunk (a shorter ttl may land): renew or expire by then.
    client.watchdog.plan(state);
    let reports = nodes.reports(&replies, describe_compare_and_act);
    if quorum.impossible(not_ours) {
        state.mark_lost(if taken {
            LossReason::TakenOver
        } else {
            LossReason::Deleted
        });
        return Err(Error::new(
            ErrorKind::Lost,
            format!(
                "cannot extend {}: it is no longer ours on a majority of nodes",
                state.describe()
            ),
        )
        .with_resource(state.resource())
        .with_nodes(reports));
    }
    let why = if quorum.reached(done) {
        format!(
            "{done} of {} nodes confirmed, but the answers came after the new ttl ({ttl:?}, less the drift \
             margin) had run out; use a ttl well above the round trip",
            nodes.nodes().len()
        )
    } else {
        format!(
            "only {done} of {} nodes confirmed ({} needed)",
            nodes.nodes().len(),
            quorum.needed()
        )
    };
    Err(Error::new(
        quorum_failure_kind(&reports),
        format!(
            "cannot extend {}: {why}; it stays valid for {:?} (what the nodes may now hold) \
             unless a retry succeeds",
            state.describe(),
            state.remaining()
        ),
    )
    .with_resource(state.resource())
    .with_nodes(reports))
}

/// Stops the acquire requests still on their way to slower nodes, and waits
/// until their task has ended: what it sent is then queued ahead of the
/// release on each connection, and what it had not sent never will be, so
/// no late grant can land after the release.
async fn stop_stragglers(state: &LockState) {
    let stragglers = state.stragglers_slot().take();
    if let Some(task) = stragglers {
        task.abort();
        // Err is the cancellation just asked for (or a panic already reported).
        let _ = task.await;
    }
}

async fn release(state: &LockState, client: &ClientShared) -> Result<()> {
    client.ensure_usable()?;
    let _busy = state.busy.lock().await;
    if state.status() == LockStatus::Released {
        return Err(not_held(state, "was already released"));
    }
    // A lost lock is still deleted where it is ours, but reported as not held.
    let was_held = state.leave_held(LockStatus::Released);
    client.watchdog.cancel(state);
    stop_stragglers(state).await;
    let nodes = &client.nodes;
    let (script, release_keys) = state.release_keys();
    // A looping holder's release reserves the key for its next acquire,
    // waking nobody, so that it can take it back at once ([`crate::linger`]).
    let linger = state
        .linger
        .as_ref()
        .filter(|linger| was_held && linger.may_linger());
    let reserved = linger.map(|_| client.wakeups.register());
    let how = match &reserved {
        Some(reserved) => Release::Linger {
            keep_for: &reserved.id,
        },
        None => Release::HandOff,
    };
    let args = queue::release_args(nodes, &state.token, how);
    let keys: Vec<&str> = release_keys.iter().map(String::as_str).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Sent to every node, not just a quorum (a late grant may have landed
    // anywhere); the answer comes once a quorum decided, and the rest go on
    // in the background, already queued on their connections ahead of
    // anything this client sends later.
    let decided = nodes
        .decide(script, &keys, &args, |r| {
            compare_and_act(r) == Some(CompareAndAct::Done)
        })
        .await;
    let replies = decided.replies;
    // Counted for `Client::settle`: a process about to exit waits for them.
    decided.stragglers.finish_holding(|| nodes.background.start());
    clean_up_unreached(
        nodes,
        (script, release_keys.clone()),
        &state.token,
        &replies,
        client.connect_timeout,
    );
    let (done, not_ours, _) = tally(replies.iter().map(Option::as_ref));
    let quorum = nodes.quorum();
    tracing::debug!(resource = %state.resource(), released_on = done, "lock released");
    if !was_held {
        return Err(not_held(state, "was lost before release"));
    }
    if let (Some(linger), Some(reserved)) = (linger, reserved) {
        client.lingers.linger(nodes, linger, reserved);
    } else if let Some(linger) = &state.linger {
        client.lingers.released(&linger.claim);
    }
    if quorum.reached(done) {
        client.metrics.released(state.resource());
        return Ok(());
    }
    let reports = nodes.reports(&replies, describe_compare_and_act);
    if quorum.impossible(not_ours) {
        return Err(not_held(state, "had already expired or been taken over").with_nodes(reports));
    }
    Err(Error::new(
        quorum_failure_kind(&reports),
        format!(
            "release of {} was confirmed by only {done} of {} nodes; those that failed get it \
             again in the background, and where it never lands the lock expires at its ttl",
            state.describe(),
            nodes.nodes().len()
        ),
    )
    .with_resource(state.resource())
    .with_nodes(reports))
}

/// Sends the release again, in the background, to the nodes that failed or
/// had no connection when it was decided: a grant may sit there, and would
/// otherwise block the resource until its ttl. Waits for a node's
/// connection to come back for up to `patience`.
fn clean_up_unreached(
    nodes: &Arc<NodeSet>,
    (script, keys): (&'static LuaScript, Vec<String>),
    token: &LockToken,
    replies: &[Option<Reply>],
    patience: Duration,
) {
    let is_failed = |r: &Option<Reply>| matches!(r, Some(Err(_)));
    if !replies.iter().any(is_failed) {
        return;
    }
    let failed: Vec<bool> = replies.iter().map(is_failed).collect();
    queue::release_in_background(nodes, script, keys, token, Release::HandOff, patience, move |i| {
        failed[i]
    });
}

fn not_held(state: &LockState, why: &str) -> Error {
    Error::new(ErrorKind::NotHeld, format!("{} {why}", state.describe())).with_resource(state.resource())
}

impl Lock {
    /// Releases the lock in the background, without waiting: for a lock
    /// nobody will use (see [`Unclaimed`]), or one a front's caller can no
    /// longer receive. [`crate::Client::settle`] waits for it.
    pub fn release_in_background(&self) {
        let running = self.client.nodes.background.start();
        let release = self.release_task();
        if let Ok(runtime) = runtime::handle() {
            runtime.spawn(async move {
                let _running = running;
                // Nobody waits for the outcome; a lock already lost is NotHeld.
                let _ = release.await;
            });
        }
    }
}

/// A granted lock on its way to a caller who may have stopped waiting for
/// it: a front's wait cancelled (Ctrl-C, an asyncio or JavaScript abort, a
/// signal) just as the grant came. Dropped unclaimed, it releases the lock
/// in the background, so the key does not block the resource until its ttl.
pub struct Unclaimed(Option<Lock>);

impl Unclaimed {
    /// Wraps a lock that is not in its caller's hands yet.
    pub fn new(lock: Lock) -> Self {
        Unclaimed(Some(lock))
    }

    /// Looks at the lock before it is handed over.
    pub(crate) fn peek<T>(&self, look: impl FnOnce(&Lock) -> T) -> T {
        look(
            self.0
                .as_ref()
                .expect("an Unclaimed holds its lock until claimed or dropped"),
        )
    }

    /// Hands the lock over: from now on the caller owns it.
    pub fn claim(mut self) -> Lock {
        self.0
            .take()
            .expect("an Unclaimed holds its lock until claimed or dropped")
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        if let Some(lock) = self.0.take() {
            tracing::debug!(resource = %lock.resource(), "a granted lock nobody waited for; releasing it");
            lock.release_in_background();
        }
    }
}

impl fmt::Debug for Unclaimed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Unclaimed").field(&self.0).finish()
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Stops the watchdog without I/O or blocking; the key expires at its ttl.
        self.client.watchdog.cancel(&self.state);
    }
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("resource", &self.state.resource())
            .field("fencing_token", &self.state.fencing_token)
            .field("status", &self.state.status())
            .field("remaining", &self.state.remaining())
            .field("token", &self.state.token)
            .finish()
    }
}

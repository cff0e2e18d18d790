//! Leader election (docs/protocol.md §4.10): a campaign is an `acquire` of
//! the election's lock that waits until it wins, then announces the new
//! leader (its epoch, which is its fencing token, and its value) on every
//! node. Leadership renews, is lost and is given up exactly as a lock is.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::fenced::Fence;
use crate::keys;
use crate::lock::{Lock, Unclaimed};
use crate::lock_state::LossReason;
use crate::options::{LockOptions, MAX_WAIT};
use crate::scripts;
use crate::shared::ClientShared;

/// The largest value a leader may announce, in bytes: an address or a small
/// document, copied to every node and every observer.
pub const MAX_LEADER_VALUE: usize = 64 * 1024;

/// What a campaign asks for: the leader's lease (ttl, renewed while it
/// leads), how long to wait to win, and the value announced to observers.
///
/// ```
/// use std::time::Duration;
/// use fencelock::CampaignOptions;
///
/// let options = CampaignOptions::new(Duration::from_secs(10)).value("10.0.0.7:8080");
/// # let _ = options;
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CampaignOptions {
    lock: LockOptions,
    wait: Option<Duration>,
    value: Vec<u8>,
}

impl CampaignOptions {
    /// Options with this lease: a leader that stops renewing (it died, or
    /// lost its network) is replaced about one ttl later. A leader renews its
    /// lease whatever the client's default for locks
    /// ([`crate::ClientBuilder::default_auto_renew`]).
    pub fn new(ttl: Duration) -> Self {
        CampaignOptions {
            lock: LockOptions::new(ttl).auto_renew(true),
            ..CampaignOptions::default()
        }
    }

    /// Sets the lease.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.lock = self.lock.ttl(ttl);
        self
    }

    /// How long [`Client::campaign`] waits to win. Unset: until it wins
    /// (up to [`MAX_WAIT`]), not the client's default wait.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// What observers learn about this leader (an address, an id), at
    /// most [`MAX_LEADER_VALUE`] bytes. Empty by default.
    pub fn value(mut self, value: impl Into<Vec<u8>>) -> Self {
        self.value = value.into();
        self
    }

    fn lock_options(&self) -> LockOptions {
        self.lock.clone().wait(self.wait.unwrap_or(MAX_WAIT))
    }

    fn check_value(&self) -> Result<()> {
        if self.value.len() > MAX_LEADER_VALUE {
            return Err(Error::invalid(format!(
                "the leader value is {} bytes long; the limit is {MAX_LEADER_VALUE} bytes \
                 (announce an address or an id, not the data itself)",
                self.value.len()
            )));
        }
        Ok(())
    }
}

impl fmt::Debug for CampaignOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CampaignOptions")
            .field("lock", &self.lock)
            .field("wait", &self.wait)
            .field("value_bytes", &self.value.len())
            .finish()
    }
}

/// Leadership won by [`Client::campaign`]: held like a [`Lock`] on the
/// election's name, renewed while held, and lost the way a lock is lost.
///
/// Dropping it stops renewing without network I/O; another candidate wins
/// once its lease ends. Call [`Leadership::resign`] to hand over at once.
pub struct Leadership {
    lock: Lock,
    value: Vec<u8>,
}

impl Leadership {
    /// The election's name.
    pub fn name(&self) -> &str {
        self.lock.resource()
    }

    /// This leader's epoch: its fencing token, strictly greater than every
    /// earlier leader's. Pass it to what the leader writes, so a deposed
    /// leader's late writes are refused.
    pub fn epoch(&self) -> u64 {
        self.lock.fencing_token()
    }

    /// The epoch with this grant's holder id, for fenced writes
    /// ([`Client::fenced_set`]).
    pub fn fence(&self) -> Fence {
        self.lock.fence()
    }

    /// The value announced to observers.
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// Whether this is still the leader, as far as this process can know
    /// (the lease's validity has not run out and no renewal found it gone).
    pub fn is_leader(&self) -> bool {
        self.lock.is_held()
    }

    /// Resolves when leadership is lost, with the reason (as
    /// [`Lock::lost`]). Never resolves after [`Leadership::resign`].
    pub async fn lost(&self) -> LossReason {
        self.lock.lost().await
    }

    /// Gives up leadership at once (a release of the election's lock): the
    /// next candidate in line is woken and wins.
    ///
    /// Errors: [`crate::ErrorKind::NotHeld`] when leadership had already
    /// been lost or given up.
    pub async fn resign(&self) -> Result<()> {
        self.lock.release().await
    }

    /// The lock behind this leadership, for the bindings, which hand a
    /// leadership to their users through their lock handles.
    pub fn into_lock(self) -> Lock {
        self.lock
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("name", &self.name())
            .field("epoch", &self.epoch())
            .field("is_leader", &self.is_leader())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Checks a campaign's arguments the way [`Client::campaign`] would,
    /// without any I/O: for fronts that start campaigns in the background
    /// but must report a bad name, ttl, wait or value to the caller at once.
    ///
    /// Errors: [`crate::ErrorKind::InvalidArgument`], as [`Client::check_request`]
    /// says, and for a value longer than [`MAX_LEADER_VALUE`].
    pub fn check_campaign(&self, name: &str, options: &CampaignOptions) -> Result<()> {
        options.check_value()?;
        self.check_request(name, &options.lock_options())
    }

    /// Campaigns to lead the election `name`: waits in line (woken by push,
    /// like any waiter) until it wins, then announces the new leader to
    /// observers ([`Client::observe`]) and returns its [`Leadership`].
    ///
    /// An election is a lock on its name (`fencelock status NAME` shows its
    /// leader's lease): do not also lock that name for anything else.
    ///
    /// Errors: as [`Client::acquire`] ([`crate::ErrorKind::Timeout`] once a
    /// set `wait` passed), and [`crate::ErrorKind::InvalidArgument`] for a
    /// value longer than [`MAX_LEADER_VALUE`]. Dropping the future cancels
    /// the campaign and leaves nothing behind.
    pub async fn campaign(&self, name: &str, options: CampaignOptions) -> Result<Leadership> {
        options.check_value()?;
        // Unclaimed until announced: a campaign dropped meanwhile resigns in
        // the background instead of leaving the election held until its ttl.
        let won = Unclaimed::new(self.acquire(name, options.lock_options()).await?);
        let (token, lock_key, epoch) = won.peek(|lock| {
            let (token, lock_key) = lock.identity();
            (token, lock_key, lock.fencing_token())
        });
        let value = options.value;
        let announcement = announce(self.shared().clone(), token, lock_key, epoch, value.clone());
        if !crate::runtime::run(announcement).await? {
            tracing::warn!(
                election = %name,
                "elected, but fewer than a majority of nodes took the announcement: observers learn of \
                 this leader only from the nodes that did"
            );
        }
        Ok(Leadership {
            lock: won.claim(),
            value,
        })
    }
}

/// Writes and publishes the announcement on every node (ANNOUNCE); true
/// when a majority took it.
async fn announce(
    shared: Arc<ClientShared>,
    token: String,
    lock_key: String,
    epoch: u64,
    value: Vec<u8>,
) -> bool {
    let leader_key = keys::leader_key(&lock_key);
    let epoch = epoch.to_string();
    let args: [&[u8]; 3] = [token.as_bytes(), epoch.as_bytes(), &value];
    let replies = shared
        .nodes
        .everywhere(
            &scripts::ANNOUNCE,
            &[&lock_key, &leader_key],
            &args,
            shared.connect_timeout,
            |_| true,
        )
        .await;
    let took = replies
        .iter()
        .filter(|reply| matches!(reply, Some(Ok(redis::Value::Int(1)))))
        .count();
    shared.nodes.quorum().reached(took)
}

//! Following an election (docs/protocol.md §4.10): observers subscribe to
//! the election's channel on every node and learn of each new leader by
//! push; they also read the current leader from every node when they start
//! and every [`REFRESH_EVERY`], and from a node whenever their subscription
//! there (re)starts, so a lost message delays them by at most that much.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tokio_util::sync::ReusableBoxFuture;

use crate::client::Client;
use crate::error::Result;
use crate::keys::{self, LockKeys};
use crate::scripts;
use crate::shared::ClientShared;

/// How often an observer reads the current leader even without a message.
pub(crate) const REFRESH_EVERY: Duration = Duration::from_secs(2);

/// The pause before a subscription that ended (or could not start) is tried again.
const RESUBSCRIBE_PAUSE: Duration = Duration::from_millis(100);

/// A leader, as observers learn of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    /// The value the leader announced ([`crate::CampaignOptions::value`]).
    pub value: Vec<u8>,
    /// Its epoch: its fencing token, larger than every earlier leader's.
    pub epoch: u64,
}

/// The leaders of one election, in increasing epochs: a [`Stream`] that
/// starts with the current leader (if there is one) and yields each new
/// one. A consumer slower than the elections skips to the latest leader.
/// No item says that there is no leader: a leader that resigned or died
/// is followed by the next one to win.
///
/// It can be shared (`Send + Sync`): calls of [`Observation::next`] from
/// several tasks take turns, each leader going to one of them, and
/// [`Observation::close`] ends every wait. As a [`Stream`] it keeps a place
/// of its own: it yields every leader whatever the calls of `next` took,
/// and a poll of it left pending holds none of them up. Closing it, dropping it or
/// closing its client ([`Client::close`]) stops observing (its
/// subscriptions end); it then yields `None`.
pub struct Observation {
    following: Arc<Following>,
    /// The [`Stream`]'s next item, with the stream's own receiver. In a
    /// mutex only so that the observation is `Sync`: `poll_next` has
    /// `&mut self` and never locks it.
    stream: std::sync::Mutex<ReusableBoxFuture<'static, StreamItem>>,
}

/// A leader the [`Stream`] yields, and its receiver for the next one.
type StreamItem = (Option<Leader>, watch::Receiver<Option<Leader>>);

/// What every wait on one observation shares.
struct Following {
    leaders: tokio::sync::Mutex<watch::Receiver<Option<Leader>>>,
    closing: CancellationToken,
    task: AbortHandle,
}

impl Following {
    /// The next leader, or `None` once closed or ended. Dropping the future
    /// loses nothing: the leader it waited for goes to the next call.
    async fn next(self: Arc<Self>) -> Option<Leader> {
        let closing = self.closing.clone();
        closing
            .run_until_cancelled(async move { next_leader(&mut *self.leaders.lock().await).await })
            .await
            .flatten()
    }

    /// The [`Stream`]'s next leader, on its own receiver.
    async fn stream_next(self: Arc<Self>, mut leaders: watch::Receiver<Option<Leader>>) -> StreamItem {
        let leader = self
            .closing
            .run_until_cancelled(next_leader(&mut leaders))
            .await
            .flatten();
        (leader, leaders)
    }
}

/// The next leader `leaders` gives, or `None` once its sender is gone.
async fn next_leader(leaders: &mut watch::Receiver<Option<Leader>>) -> Option<Leader> {
    leaders.changed().await.ok()?;
    leaders.borrow_and_update().clone()
}

impl Observation {
    /// The next leader; `None` once the observation has ended: it was
    /// closed or dropped, its client was closed, or the client's internal
    /// runtime is gone. Cancel-safe.
    pub async fn next(&self) -> Option<Leader> {
        self.following.clone().next().await
    }

    /// Stops observing: its subscriptions end, and every wait, now or later,
    /// yields `None`. Idempotent; no I/O.
    pub fn close(&self) {
        self.following.closing.cancel();
        self.following.task.abort();
    }

    /// Whether [`Observation::close`] was called (or the observation dropped).
    pub fn is_closed(&self) -> bool {
        self.following.closing.is_cancelled()
    }
}

impl Stream for Observation {
    type Item = Leader;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Leader>> {
        let following = self.following.clone();
        let stream = self
            .stream
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (leader, leaders) = ready!(stream.poll(cx));
        stream.set(following.stream_next(leaders));
        Poll::Ready(leader)
    }
}

impl Drop for Observation {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Observation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observation")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Follows the election `name`: the current leader, then each new one
    /// as it announces itself (see [`Observation`]). Holds one subscriber
    /// connection per node while it runs.
    ///
    /// Errors: [`crate::ErrorKind::InvalidArgument`] for a bad name,
    /// [`crate::ErrorKind::Closed`] after [`Client::close`].
    pub fn observe(&self, name: &str) -> Result<Observation> {
        self.shared().ensure_open()?;
        let lock_key = LockKeys::new(&self.shared().key_prefix, name)?.into_lock_key();
        let runtime = crate::runtime::handle()?;
        let (sender, receiver) = watch::channel(None);
        let follower = Follower {
            shared: self.shared().clone(),
            leader_key: keys::leader_key(&lock_key),
            channel: keys::leader_channel(&self.shared().key_prefix, name),
            lock_key,
            leaders: sender,
        };
        let stream_receiver = receiver.clone();
        let following = Arc::new(Following {
            leaders: tokio::sync::Mutex::new(receiver),
            closing: CancellationToken::new(),
            task: runtime.spawn(follower.run()).abort_handle(),
        });
        Ok(Observation {
            stream: std::sync::Mutex::new(ReusableBoxFuture::new(
                following.clone().stream_next(stream_receiver),
            )),
            following,
        })
    }
}

/// What makes an observer look again.
enum Hint {
    /// A leader's announcement arrived by push.
    Announced(Leader),
    /// Node `index`'s subscription started: what that node announced
    /// before it is read (the other nodes' own subscriptions cover them).
    Subscribed(usize),
}

/// The task behind an [`Observation`].
struct Follower {
    shared: Arc<ClientShared>,
    lock_key: String,
    leader_key: String,
    channel: String,
    leaders: watch::Sender<Option<Leader>>,
}

impl Follower {
    async fn run(self) {
        let (hints, mut hinted) = mpsc::unbounded_channel();
        // Aborted with this task when the observation is dropped.
        let mut subscribers = JoinSet::new();
        for index in 0..self.shared.nodes.nodes().len() {
            subscribers.spawn(subscribe(
                self.shared.clone(),
                index,
                self.channel.clone(),
                hints.clone(),
            ));
        }
        let mut refresh = tokio::time::interval(REFRESH_EVERY);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let leader = tokio::select! {
                _ = refresh.tick() => self.read(|_| true).await,
                hint = hinted.recv() => match hint {
                    Some(Hint::Announced(leader)) => Some(leader),
                    Some(Hint::Subscribed(index)) => self.read(|node| node == index).await,
                    None => return,
                },
                () = self.leaders.closed() => return,
                () = self.shared.closed() => return,
            };
            if let Some(leader) = leader {
                self.leaders.send_if_modified(|current| {
                    let newer = current.as_ref().is_none_or(|known| leader.epoch > known.epoch);
                    if newer {
                        *current = Some(leader);
                    }
                    newer
                });
            }
        }
    }

    /// The announced leader that still holds the election's lock, with the
    /// largest epoch any of the nodes `only` picks reports (LEADER there).
    async fn read(&self, only: impl Fn(usize) -> bool) -> Option<Leader> {
        let replies = self
            .shared
            .nodes
            .everywhere(
                &scripts::LEADER,
                &[&self.lock_key, &self.leader_key],
                &[] as &[&str],
                self.shared.connect_timeout,
                only,
            )
            .await;
        replies
            .into_iter()
            .filter_map(|reply| match reply {
                Some(Ok(redis::Value::Array(fields))) => leader_from_reply(fields),
                _ => None,
            })
            .max_by_key(|leader| leader.epoch)
    }
}

/// `{epoch, value}` from LEADER.
fn leader_from_reply(fields: Vec<redis::Value>) -> Option<Leader> {
    let [redis::Value::BulkString(epoch), redis::Value::BulkString(value)] =
        <[_; 2]>::try_from(fields).ok()?
    else {
        return None;
    };
    let epoch = std::str::from_utf8(&epoch).ok()?.parse().ok()?;
    Some(Leader { value, epoch })
}

/// `<epoch> <value>`, as ANNOUNCE publishes it.
fn leader_from_message(payload: &[u8]) -> Option<Leader> {
    let space = payload.iter().position(|&byte| byte == b' ')?;
    let epoch = std::str::from_utf8(&payload[..space]).ok()?.parse().ok()?;
    Some(Leader {
        value: payload[space + 1..].to_vec(),
        epoch,
    })
}

/// Node `index`'s subscription to the election's channel, for as long as
/// the observation runs: subscribes again after its connection ends.
async fn subscribe(
    shared: Arc<ClientShared>,
    index: usize,
    channel: String,
    hints: mpsc::UnboundedSender<Hint>,
) {
    let node = &shared.nodes.nodes()[index];
    loop {
        match node.subscribe(&channel).await {
            Ok(mut messages) => {
                if hints.send(Hint::Subscribed(index)).is_err() {
                    return;
                }
                while let Some(message) = messages.next().await {
                    if let Some(leader) = leader_from_message(&message)
                        && hints.send(Hint::Announced(leader)).is_err()
                    {
                        return;
                    }
                }
                tracing::debug!(node = %node.endpoint(), "election subscription ended; reading the leader until it is back");
            }
            Err(failure) => {
                tracing::debug!(node = %node.endpoint(), error = %failure, "could not subscribe to an election");
            }
        }
        tokio::time::sleep(RESUBSCRIBE_PAUSE).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_the_epoch_then_any_bytes() {
        let leader = leader_from_message(b"42 host a:1 \xff").unwrap();
        assert_eq!(leader.epoch, 42);
        assert_eq!(leader.value, b"host a:1 \xff");
        assert_eq!(leader_from_message(b"7 ").unwrap().value, b"");
        assert_eq!(leader_from_message(b"x 1"), None);
        assert_eq!(leader_from_message(b"12"), None);
    }
}

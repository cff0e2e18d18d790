//! Counting semaphores: at most `permits` holders at once, each with its own
//! lease, renewal, lost signal and fencing token (docs/protocol.md §4.11).

use std::sync::Arc;
use std::time::Duration;

use crate::acquire;
use crate::claim::Claim;
use crate::client::Client;
use crate::error::{ErrorKind, Result};
use crate::keys::SemaphoreKeys;
use crate::lock::Lock;
use crate::node::as_i64;
use crate::options::LockOptions;
use crate::runtime;
use crate::scripts;

/// A counting semaphore: up to [`Semaphore::permits`] holders at a time.
///
/// Each permit is a [`Lock`] on one of the semaphore's permit keys, so it
/// renews, signals its loss and carries a fencing token as a lock does. The
/// tokens of one semaphore come from one counter: on a single node every
/// grant's token is larger than every earlier one; in quorum mode the
/// successive holders of each permit get strictly increasing tokens.
/// Every client of a semaphore must give the same number of permits while
/// it is in use ([`ErrorKind::InvalidArgument`] otherwise).
#[derive(Clone)]
pub struct Semaphore {
    client: Client,
    keys: Arc<SemaphoreKeys>,
}

impl Client {
    /// The semaphore `name` with `permits` permits (1 to
    /// [`crate::MAX_PERMITS`]). No I/O: the nodes see it on the first
    /// acquire.
    ///
    /// Errors: [`ErrorKind::InvalidArgument`] for a bad name or number of permits.
    pub fn semaphore(&self, name: &str, permits: u32) -> Result<Semaphore> {
        Ok(Semaphore {
            keys: Arc::new(SemaphoreKeys::new(&self.shared().key_prefix, name, permits)?),
            client: self.clone(),
        })
    }
}

impl Semaphore {
    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.keys.name()
    }

    /// How many holders it admits at once.
    pub fn permits(&self) -> u32 {
        self.keys.permits()
    }

    /// Takes a permit, waiting (woken when one is released) for up to the
    /// options' `wait`. The permit is a [`Lock`] named after the semaphore.
    ///
    /// Errors as [`Client::acquire`]; also [`ErrorKind::InvalidArgument`]
    /// when the nodes hold this semaphore with another number of permits.
    pub async fn acquire(&self, options: LockOptions) -> Result<Lock> {
        acquire::claim(
            self.client.shared(),
            Ok(Claim::Permit(self.keys.clone())),
            options,
        )
        .await
    }

    /// One attempt: `Ok(None)` when every permit is held.
    pub async fn try_acquire(&self, options: LockOptions) -> Result<Option<Lock>> {
        acquire::none_if_refused(self.acquire(options.wait(Duration::ZERO)).await)
    }

    /// How many permits are held now: those held on a majority of the
    /// nodes (a permit handed to a waiter but not yet taken is not counted).
    /// For monitoring: the answer may be out of date when it arrives.
    pub async fn holders(&self) -> Result<usize> {
        let shared = self.client.shared().clone();
        shared.ready().await?;
        let keys = self.keys.clone();
        runtime::run(async move {
            let slots: Vec<&str> = keys.slots().iter().map(String::as_str).collect();
            let replies = shared
                .nodes
                .everywhere(&scripts::SEM_HOLDERS, &slots, &[] as &[&str], shared.connect_timeout, |_| true)
                .await;
            let mut held_on = vec![0usize; slots.len()];
            let mut answered = 0;
            for reply in replies.into_iter().flatten() {
                let Ok(redis::Value::Array(indices)) = reply else { continue };
                answered += 1;
                for index in indices.iter().filter_map(as_i64) {
                    if let Some(count) = usize::try_from(index - 1).ok().and_then(|i| held_on.get_mut(i)) {
                        *count += 1;
                    }
                }
            }
            let quorum = shared.nodes.quorum();
            if !quorum.reached(answered) {
                return Err(crate::Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "could not count the holders of semaphore '{}': only {answered} of {} nodes answered, \
                         {} must; check that the nodes are up and reachable",
                        keys.name(),
                        shared.nodes.nodes().len(),
                        quorum.needed()
                    ),
                )
                .with_resource(keys.name()));
            }
            Ok(held_on.into_iter().filter(|&n| quorum.reached(n)).count())
        })
        .await?
    }
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name())
            .field("permits", &self.permits())
            .finish()
    }
}

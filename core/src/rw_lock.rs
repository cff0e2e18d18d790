//! Read-write locks: many readers or one writer, each grant with its own
//! lease, renewal, lost signal and fencing token (docs/protocol.md §4.12).

use std::sync::Arc;
use std::time::Duration;

use crate::acquire;
use crate::claim::Claim;
use crate::client::Client;
use crate::error::Result;
use crate::keys::RwKeys;
use crate::lock::Lock;
use crate::options::LockOptions;

/// A read-write lock: any number of readers at once, or one writer.
///
/// Each reader holds a key of its own, so a reader that crashes frees
/// itself at its ttl without waiting for the others, and renews, signals
/// its loss and releases on its own. Readers and writers take fencing
/// tokens from one counter per lock: a writer's token is larger than that
/// of every reader and writer granted before it, so a store that keeps the
/// largest token it has seen refuses a stale writer. Writers are not
/// starved: once a writer waits, readers that come later queue behind it,
/// and it waits only for the readers already holding.
#[derive(Clone)]
pub struct RwLock {
    client: Client,
    keys: Arc<RwKeys>,
}

impl Client {
    /// The read-write lock `name`. No I/O.
    ///
    /// Errors: [`crate::ErrorKind::InvalidArgument`] for a bad name. Its keys
    /// never collide with those of a lock or semaphore of the same name.
    pub fn rw_lock(&self, name: &str) -> Result<RwLock> {
        Ok(RwLock {
            keys: Arc::new(RwKeys::new(&self.shared().key_prefix, name)?),
            client: self.clone(),
        })
    }
}

impl RwLock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        self.keys.name()
    }

    /// Takes the lock for reading, beside other readers, waiting (woken by
    /// push) while a writer holds it or waits ahead, for up to the options'
    /// `wait`. Errors as [`Client::acquire`].
    pub async fn read(&self, options: LockOptions) -> Result<Lock> {
        acquire::claim(self.client.shared(), Ok(Claim::Read(self.keys.clone())), options).await
    }

    /// Takes the lock for writing, alone, waiting (woken by push) while
    /// readers or another writer hold it, for up to the options' `wait`.
    /// Errors as [`Client::acquire`].
    pub async fn write(&self, options: LockOptions) -> Result<Lock> {
        acquire::claim(self.client.shared(), Ok(Claim::Write(self.keys.clone())), options).await
    }

    /// One attempt to read: `Ok(None)` when a writer holds it or waits.
    pub async fn try_read(&self, options: LockOptions) -> Result<Option<Lock>> {
        acquire::none_if_refused(self.read(options.wait(Duration::ZERO)).await)
    }

    /// One attempt to write: `Ok(None)` when anyone else holds it.
    pub async fn try_write(&self, options: LockOptions) -> Result<Option<Lock>> {
        acquire::none_if_refused(self.write(options.wait(Duration::ZERO)).await)
    }
}

impl std::fmt::Debug for RwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLock").field("name", &self.name()).finish()
    }
}

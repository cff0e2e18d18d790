//! A synchronous facade for callers without an async runtime.
//!
//! The same calls as [`crate::Client`] and [`crate::Lock`]; the lost-lock
//! future is [`Lock::wait_lost`] here. Each call runs on fencelock's internal
//! runtime and blocks the calling thread until it finishes. Calling from inside an async runtime returns
//! [`ErrorKind::WouldBlock`](crate::ErrorKind::WouldBlock) instead of deadlocking.
//!
//! ```no_run
//! use std::time::Duration;
//! use fencelock::{ClientBuilder, LockOptions, blocking};
//!
//! let client = blocking::Client::connect(ClientBuilder::default().node("redis://127.0.0.1:6379"))?;
//! let lock = client.acquire("jobs:cleanup", LockOptions::new(Duration::from_secs(10)))?;
//! // … critical section …
//! lock.release()?;
//! # Ok::<(), fencelock::Error>(())
//! ```

use std::time::Duration;

use crate::config::ClientBuilder;
use crate::error::Result;
use crate::inspect::NodeLockState;
use crate::lock_state::{LockStatus, LossReason};
use crate::options::LockOptions;
use crate::runtime::block_on;

/// Blocking twin of [`crate::Client`].
#[derive(Clone, Debug)]
pub struct Client {
    inner: crate::Client,
}

/// Blocking twin of [`crate::Lock`].
#[derive(Debug)]
pub struct Lock {
    inner: crate::Lock,
}

impl Client {
    /// Validates `builder` and connects.
    pub fn connect(builder: ClientBuilder) -> Result<Self> {
        let inner = block_on(builder.build())??;
        Ok(Client { inner })
    }

    /// Wraps an async client.
    pub fn from_async(inner: crate::Client) -> Self {
        Client { inner }
    }

    /// The async client underneath.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// See [`crate::Client::acquire`].
    pub fn acquire(&self, resource: &str, options: LockOptions) -> Result<Lock> {
        let (client, resource) = (self.inner.clone(), resource.to_owned());
        let inner = block_on(async move { client.acquire(&resource, options).await })??;
        Ok(Lock { inner })
    }

    /// See [`crate::Client::try_acquire`].
    pub fn try_acquire(&self, resource: &str, options: LockOptions) -> Result<Option<Lock>> {
        let (client, resource) = (self.inner.clone(), resource.to_owned());
        let inner = block_on(async move { client.try_acquire(&resource, options).await })??;
        Ok(inner.map(|inner| Lock { inner }))
    }

    /// See [`crate::Client::fenced_set`].
    pub fn fenced_set(&self, key: &str, value: &str, fence: impl Into<crate::Fence>) -> Result<()> {
        let fence = fence.into();
        let (client, key, value) = (self.inner.clone(), key.to_owned(), value.to_owned());
        block_on(async move { client.fenced_set(&key, &value, fence).await })?
    }

    /// See [`crate::Client::fenced_get`].
    pub fn fenced_get(&self, key: &str) -> Result<Option<(String, u64)>> {
        let (client, key) = (self.inner.clone(), key.to_owned());
        block_on(async move { client.fenced_get(&key).await })?
    }

    /// See [`crate::Client::inspect`].
    pub fn inspect(&self, resource: &str) -> Result<Vec<NodeLockState>> {
        let (client, resource) = (self.inner.clone(), resource.to_owned());
        block_on(async move { client.inspect(&resource).await })?
    }

    /// See [`crate::Client::resources`].
    pub fn resources(&self, matching: &str, limit: usize) -> Result<Vec<String>> {
        let (client, matching) = (self.inner.clone(), matching.to_owned());
        block_on(async move { client.resources(&matching, limit).await })?
    }

    /// See [`crate::Client::check_request`].
    pub fn check_request(&self, resource: &str, options: &LockOptions) -> Result<()> {
        self.inner.check_request(resource, options)
    }

    /// See [`crate::Client::nodes`].
    pub fn nodes(&self) -> Vec<String> {
        self.inner.nodes()
    }

    /// See [`crate::Client::quorum`].
    pub fn quorum(&self) -> usize {
        self.inner.quorum()
    }

    /// See [`crate::Client::close`] (never blocks).
    pub fn close(&self) {
        self.inner.close()
    }
}

impl Lock {
    /// The async lock underneath.
    pub fn as_async(&self) -> &crate::Lock {
        &self.inner
    }

    /// See [`crate::Lock::resource`].
    pub fn resource(&self) -> &str {
        self.inner.resource()
    }

    /// See [`crate::Lock::fencing_token`].
    pub fn fencing_token(&self) -> u64 {
        self.inner.fencing_token()
    }

    /// See [`crate::Lock::fence`].
    pub fn fence(&self) -> crate::Fence {
        self.inner.fence()
    }

    /// See [`crate::Lock::status`].
    pub fn status(&self) -> LockStatus {
        self.inner.status()
    }

    /// See [`crate::Lock::renewals`].
    pub fn renewals(&self) -> u32 {
        self.inner.renewals()
    }

    /// See [`crate::Lock::is_held`].
    pub fn is_held(&self) -> bool {
        self.inner.is_held()
    }

    /// See [`crate::Lock::remaining`].
    pub fn remaining(&self) -> Duration {
        self.inner.remaining()
    }

    /// See [`crate::Lock::check_extend`].
    pub fn check_extend(&self, ttl: Duration) -> Result<()> {
        self.inner.check_extend(ttl)
    }

    /// See [`crate::Lock::extend`].
    pub fn extend(&self, ttl: Duration) -> Result<()> {
        block_on(self.inner.extend_task(ttl))?
    }

    /// See [`crate::Lock::release`].
    pub fn release(&self) -> Result<()> {
        block_on(self.inner.release_task())?
    }

    /// Waits up to `timeout` for the lock to be lost (the blocking form of
    /// [`crate::Lock::lost`]); returns the reason, or `None` if it is still
    /// held (or was released) when the time is up.
    pub fn wait_lost(&self, timeout: Duration) -> Result<Option<LossReason>> {
        let lost = self.inner.lost_task();
        block_on(async move { tokio::time::timeout(timeout, lost).await.ok() })
    }
}

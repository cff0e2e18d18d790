//! Semaphores and read-write locks: each grant is a [`NativeLock`].

use std::sync::Arc;

use fencelock::{Client, RwLock, Semaphore};

use crate::client::NativeLockOptions;
use crate::errors::Result;
use crate::lock::{NativeLock, granted, granted_one};

/// A counting semaphore.
#[derive(uniffi::Object)]
pub struct NativeSemaphore {
    client: Client,
    semaphore: Semaphore,
}

impl NativeSemaphore {
    pub(crate) fn new(client: Client, semaphore: Semaphore) -> Arc<Self> {
        Arc::new(NativeSemaphore { client, semaphore })
    }
}

#[uniffi::export]
impl NativeSemaphore {
    /// The semaphore's name.
    pub fn name(&self) -> String {
        self.semaphore.name().to_owned()
    }

    /// How many holders it admits at once.
    pub fn permits(&self) -> u32 {
        self.semaphore.permits()
    }

    /// Checks a permit request's options without I/O.
    pub fn check(&self, options: NativeLockOptions) -> Result<()> {
        Ok(self
            .client
            .check_request(self.semaphore.name(), &options.to_core())?)
    }

    /// Takes a permit, waiting up to the options' wait.
    pub async fn acquire(&self, options: NativeLockOptions) -> Result<Arc<NativeLock>> {
        let (semaphore, options) = (self.semaphore.clone(), options.to_core());
        granted_one(async move { semaphore.acquire(options).await }).await
    }

    /// One attempt: `None` when every permit is held.
    pub async fn try_acquire(&self, options: NativeLockOptions) -> Result<Option<Arc<NativeLock>>> {
        let (semaphore, options) = (self.semaphore.clone(), options.to_core());
        granted(async move { semaphore.try_acquire(options).await }).await
    }

    /// How many permits are held now (for monitoring).
    pub async fn holders(&self) -> Result<u32> {
        let holders = self.semaphore.holders().await?;
        Ok(u32::try_from(holders).unwrap_or(u32::MAX))
    }
}

/// A read-write lock.
#[derive(uniffi::Object)]
pub struct NativeRwLock {
    client: Client,
    rw: RwLock,
}

impl NativeRwLock {
    pub(crate) fn new(client: Client, rw: RwLock) -> Arc<Self> {
        Arc::new(NativeRwLock { client, rw })
    }
}

#[uniffi::export]
impl NativeRwLock {
    /// The lock's name.
    pub fn name(&self) -> String {
        self.rw.name().to_owned()
    }

    /// Checks a request's options without I/O.
    pub fn check(&self, options: NativeLockOptions) -> Result<()> {
        Ok(self.client.check_request(self.rw.name(), &options.to_core())?)
    }

    /// Takes it for reading, beside other readers.
    pub async fn read(&self, options: NativeLockOptions) -> Result<Arc<NativeLock>> {
        let (rw, options) = (self.rw.clone(), options.to_core());
        granted_one(async move { rw.read(options).await }).await
    }

    /// Takes it for writing, alone.
    pub async fn write(&self, options: NativeLockOptions) -> Result<Arc<NativeLock>> {
        let (rw, options) = (self.rw.clone(), options.to_core());
        granted_one(async move { rw.write(options).await }).await
    }

    /// One attempt to read: `None` when a writer holds it or waits.
    pub async fn try_read(&self, options: NativeLockOptions) -> Result<Option<Arc<NativeLock>>> {
        let (rw, options) = (self.rw.clone(), options.to_core());
        granted(async move { rw.try_read(options).await }).await
    }

    /// One attempt to write: `None` when anyone else holds it.
    pub async fn try_write(&self, options: NativeLockOptions) -> Result<Option<Arc<NativeLock>>> {
        let (rw, options) = (self.rw.clone(), options.to_core());
        granted(async move { rw.try_write(options).await }).await
    }
}

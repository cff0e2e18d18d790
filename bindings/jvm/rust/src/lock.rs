//! `NativeLock`: a held lock (or permit, reader, writer, leadership).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fencelock::{Lock, LockStatus, LossReason, Unclaimed};

use crate::errors::Result;

/// A held lock.
///
/// Handed to Kotlin unclaimed: the Kotlin API calls [`NativeLock::claim`] as
/// soon as it has the handle. A handle dropped before that (its coroutine
/// was cancelled just as the lock was granted, so uniffi dropped the result)
/// releases the lock in the background instead of leaving it held until its
/// ttl. A claimed handle dropped without release (the Kotlin object was
/// garbage-collected) stops renewing, as the core's `Lock` does.
#[derive(uniffi::Object)]
pub struct NativeLock {
    /// Always `Some` until dropped.
    lock: Option<Lock>,
    claimed: AtomicBool,
}

impl NativeLock {
    pub(crate) fn handed_over(lock: Lock) -> Arc<Self> {
        Arc::new(NativeLock {
            lock: Some(lock),
            claimed: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> &Lock {
        self.lock
            .as_ref()
            .expect("a NativeLock holds its lock until dropped")
    }
}

impl Drop for NativeLock {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take()
            && !self.claimed.load(Ordering::Acquire)
        {
            lock.release_in_background();
        }
    }
}

/// Where a lock stands.
#[derive(uniffi::Record)]
pub struct NativeStatus {
    /// `"held"`, `"released"` or `"lost"`.
    pub state: String,
    /// For a lost lock: the loss reason's stable name.
    pub reason: Option<String>,
}

#[uniffi::export]
impl NativeLock {
    /// Takes the lock into the caller's hands (see the type's docs).
    pub fn claim(&self) {
        self.claimed.store(true, Ordering::Release);
    }

    /// The resource (or semaphore, read-write lock, election) name.
    pub fn resource(&self) -> String {
        self.lock().resource().to_owned()
    }

    /// For a semaphore's permit: which permit this is, from 0.
    pub fn permit(&self) -> Option<u32> {
        self.lock().permit()
    }

    /// The fencing token: strictly greater than every earlier holder's.
    pub fn fencing_token(&self) -> u64 {
        self.lock().fencing_token()
    }

    /// This grant's holder id, for fenced writes.
    pub fn holder(&self) -> u64 {
        self.lock().fence().holder
    }

    /// True while held and its validity has not run out.
    pub fn is_held(&self) -> bool {
        self.lock().is_held()
    }

    /// How long it stays valid without another renewal.
    pub fn remaining(&self) -> Duration {
        self.lock().remaining()
    }

    /// How many times the watchdog has renewed it.
    pub fn renewals(&self) -> u32 {
        self.lock().renewals()
    }

    /// Where it stands.
    pub fn status(&self) -> NativeStatus {
        let (state, reason) = match self.lock().status() {
            LockStatus::Held => ("held", None),
            LockStatus::Released => ("released", None),
            LockStatus::Lost(reason) => ("lost", Some(reason.name().to_owned())),
            // A status this front does not know yet: not held.
            _ => ("released", None),
        };
        NativeStatus {
            state: state.to_owned(),
            reason,
        }
    }

    /// Checks an extension's ttl without I/O.
    pub fn check_extend(&self, ttl: Duration) -> Result<()> {
        Ok(self.lock().check_extend(ttl)?)
    }

    /// Sets the ttl to `ttl` from now on a majority of nodes.
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        Ok(self.lock().extend(ttl).await?)
    }

    /// Releases it on every node; `not_held` if it was no longer held.
    pub async fn release(&self) -> Result<()> {
        Ok(self.lock().release().await?)
    }

    /// A watch on the lost signal that does not keep the lock alive.
    pub fn lost_watch(&self) -> Arc<NativeLostWatch> {
        Arc::new(NativeLostWatch {
            lost: Mutex::new(Some(Box::pin(self.lock().lost_task()))),
        })
    }
}

/// Runs an acquisition on the core's runtime and hands its lock over.
///
/// The lock travels inside the task as an [`Unclaimed`], so that whenever
/// the caller stops waiting (a cancelled coroutine drops this future), a
/// grant that already happened is released in the background: the task is
/// aborted, or its finished output dropped ([`fencelock::on_runtime`]; the
/// client's `settle` waits for either).
pub(crate) async fn granted<F>(work: F) -> Result<Option<Arc<NativeLock>>>
where
    F: Future<Output = fencelock::Result<Option<Lock>>> + Send + 'static,
{
    let unclaimed =
        fencelock::on_runtime(async move { work.await.map(|lock| lock.map(Unclaimed::new)) }).await??;
    Ok(unclaimed.map(|lock| NativeLock::handed_over(lock.claim())))
}

/// [`granted`] for acquisitions that wait: there is always a lock.
pub(crate) async fn granted_one<F>(work: F) -> Result<Arc<NativeLock>>
where
    F: Future<Output = fencelock::Result<Lock>> + Send + 'static,
{
    let lock = granted(async move { work.await.map(Some) }).await?;
    lock.ok_or_else(|| {
        fencelock::Error::new(
            fencelock::ErrorKind::Internal,
            "an acquisition ended without a lock",
        )
        .into()
    })
}

type LostFuture = Pin<Box<dyn Future<Output = LossReason> + Send>>;

/// Waits for a lock's loss holding only the lock's state, not the lock: a
/// Kotlin `Lock` garbage-collected while its loss is awaited still stops
/// renewing.
#[derive(uniffi::Object)]
pub struct NativeLostWatch {
    lost: Mutex<Option<LostFuture>>,
}

#[uniffi::export]
impl NativeLostWatch {
    /// Resolves with the loss reason's stable name when the lock is lost
    /// (never after a clean release: cancel the wait then). Once per
    /// watch: a second call resolves `None` at once.
    pub async fn wait(&self) -> Option<String> {
        let lost = self.lost.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        // The core's lost future runs on the core's runtime (uniffi polls
        // from a JVM thread); dropping this future aborts it there.
        let reason = fencelock::on_runtime(lost).await.ok()?;
        Some(reason.name().to_owned())
    }
}

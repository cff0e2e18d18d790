//! What `Client` and `AsyncClient` (and their semaphores and read-write
//! locks) share below the argument parsing: the core calls that hand out
//! locks, permits, reader and writer grants and leaderships, and
//! `inspect`'s answer as Python objects.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use fencelock::{CampaignOptions, LockOptions, Unclaimed};

/// The core's `try_acquire`: `None` when held by someone else. The lock
/// travels [`Unclaimed`] until a Python object holds it, so a wait given up
/// at the moment of the grant (Ctrl-C, a cancelled task) releases it.
pub(crate) async fn try_acquire(
    client: fencelock::Client,
    resource: String,
    options: LockOptions,
) -> fencelock::Result<Option<Unclaimed>> {
    Ok(client.try_acquire(&resource, options).await?.map(Unclaimed::new))
}

/// The core's `acquire`, the lock [`Unclaimed`] as in [`try_acquire`].
pub(crate) async fn acquire(
    client: fencelock::Client,
    resource: String,
    options: LockOptions,
) -> fencelock::Result<Unclaimed> {
    client.acquire(&resource, options).await.map(Unclaimed::new)
}

/// The core's `Semaphore::acquire`: a permit, [`Unclaimed`] as in [`try_acquire`].
pub(crate) async fn acquire_permit(
    semaphore: fencelock::Semaphore,
    options: LockOptions,
) -> fencelock::Result<Unclaimed> {
    semaphore.acquire(options).await.map(Unclaimed::new)
}

/// The core's `Semaphore::try_acquire`: `None` when every permit is held;
/// the permit [`Unclaimed`] as in [`try_acquire`].
pub(crate) async fn try_acquire_permit(
    semaphore: fencelock::Semaphore,
    options: LockOptions,
) -> fencelock::Result<Option<Unclaimed>> {
    Ok(semaphore.try_acquire(options).await?.map(Unclaimed::new))
}

/// Which side of a read-write lock an acquire takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RwMode {
    /// Shared with other readers.
    Read,
    /// Alone.
    Write,
}

/// The core's `RwLock::read` or `RwLock::write`: the grant, [`Unclaimed`]
/// as in [`try_acquire`].
pub(crate) async fn acquire_rw(
    rw: fencelock::RwLock,
    mode: RwMode,
    options: LockOptions,
) -> fencelock::Result<Unclaimed> {
    let lock = match mode {
        RwMode::Read => rw.read(options).await?,
        RwMode::Write => rw.write(options).await?,
    };
    Ok(Unclaimed::new(lock))
}

/// The core's `RwLock::try_read` or `RwLock::try_write`: `None` when the
/// lock is taken the other way (or, to write, by another writer); the
/// grant [`Unclaimed`] as in [`try_acquire`].
pub(crate) async fn try_acquire_rw(
    rw: fencelock::RwLock,
    mode: RwMode,
    options: LockOptions,
) -> fencelock::Result<Option<Unclaimed>> {
    let lock = match mode {
        RwMode::Read => rw.try_read(options).await?,
        RwMode::Write => rw.try_write(options).await?,
    };
    Ok(lock.map(Unclaimed::new))
}

/// A campaign won: the lock behind the leadership, [`Unclaimed`] until a
/// Python object holds it (as in [`acquire`]), and the value it announced.
pub(crate) struct Won {
    pub(crate) lock: Unclaimed,
    pub(crate) value: Vec<u8>,
}

/// The core's `campaign`. The leadership becomes its lock at once, so a
/// wait given up just as the campaign is won resigns instead of leaving the
/// election held until its ttl.
pub(crate) async fn campaign(
    client: fencelock::Client,
    name: String,
    options: CampaignOptions,
) -> fencelock::Result<Won> {
    let leadership = client.campaign(&name, options).await?;
    let value = leadership.value().to_vec();
    Ok(Won {
        lock: Unclaimed::new(leadership.into_lock()),
        value,
    })
}

/// `inspect`'s answer: a list of dicts with `node`, `held`, `ttl` (seconds
/// or None), `fencing_counter`, `waiters` (live waiters in its queue) and `error`.
pub(crate) fn inspect_py(py: Python<'_>, states: Vec<fencelock::NodeLockState>) -> PyResult<Py<PyAny>> {
    let list = PyList::empty(py);
    for s in states {
        let d = PyDict::new(py);
        d.set_item("node", s.node)?;
        d.set_item("held", s.held)?;
        d.set_item("ttl", s.ttl_ms.map(|ms| ms as f64 / 1000.0))?;
        d.set_item("fencing_counter", s.fencing_counter)?;
        d.set_item("waiters", s.waiters)?;
        d.set_item("error", s.error)?;
        list.append(d)?;
    }
    Ok(list.into_any().unbind())
}

//! `Client`, the sync API, and `LockContext`, its `with client.lock(...)`
//! (and the semaphores' `with sem.permit(...)`, the read-write locks'
//! `with rw.read(...)` and `with rw.write(...)`).
//!
//! Every call waits on the core's runtime with the GIL released; Ctrl-C
//! interrupts a wait on the main thread.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use crate::args::{
    AcquireArgs, CampaignArgs, PermitArgs, client_builder, permits_arg, resource_arg, text_arg,
};
use crate::calls::{RwMode, acquire, campaign, inspect_py, try_acquire};
use crate::election::Leadership;
use crate::errors::core_error;
use crate::fence::fenced_args;
use crate::lock::{Lock, LockInner};
use crate::logs;
use crate::metrics::metrics_py;
use crate::observe::Observation;
use crate::rt;
use crate::rw_lock::{self, RwLock};
use crate::semaphore::{self, Semaphore};

/// A distributed lock client over one Redis node (single-node lock) or N
/// independent masters (Redlock). Blocking calls release the GIL; Ctrl-C
/// interrupts a waiting call on the main thread.
///
/// The constructor connects to every node in parallel (unreachable nodes
/// are retried on use; bad configuration, refused credentials and TLS
/// failures raise).
///
/// TLS options (for `rediss://` nodes): `tls_ca_pem` (a private CA),
/// `tls_client_cert_pem` + `tls_client_key_pem` (client certificates) and
/// `tls_min_version`, the oldest TLS version accepted: the string `"1.2"`
/// (default; TLS 1.0 and 1.1 are never spoken) or `"1.3"`. Any other string
/// raises `ConfigError`, anything but a string (such as the float `1.3`)
/// `TypeError`. With `"1.3"`, a node that offers only TLS 1.2 fails with
/// `TlsError`, and `rediss+cluster://` nodes are refused with `ConfigError`
/// (restrict those with the servers' `tls-protocols`).
#[pyclass(module = "fencelock", frozen)]
pub struct Client {
    pub(crate) inner: fencelock::Client,
}

#[pymethods]
impl Client {
    // The options: `ClientOptionArgs` in args.rs.
    #[new]
    #[pyo3(signature = (nodes, **options))]
    fn new(py: Python<'_>, nodes: &Bound<'_, PyAny>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let builder = client_builder("Client.__new__()", nodes, options)?;
        logs::sync_level(py);
        let inner = rt::wait(py, builder.build())?.map_err(|e| core_error(py, e))?;
        Ok(Client { inner })
    }

    /// Takes the lock on `resource`, retrying while it is held elsewhere for
    /// up to `wait` seconds. `ttl` is the lease in seconds (renewed every
    /// ttl/3 while held unless `auto_renew=False`).
    ///
    /// Raises `LockTimeoutError` when `wait` passed (`NotAcquiredError` when `wait` is
    /// 0), `UnavailableError` when a majority of nodes cannot be reached.
    #[pyo3(signature = (resource, ttl=None, wait=None, **options))]
    fn acquire(
        &self,
        py: Python<'_>,
        resource: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<Lock>> {
        let args = AcquireArgs::parse("Client.acquire()", resource, ttl, wait, options)?;
        self.acquire_with(py, args)
    }

    /// One attempt: the lock, or None when it is held by someone else.
    #[pyo3(signature = (resource, ttl=None, **options))]
    fn try_acquire(
        &self,
        py: Python<'_>,
        resource: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Option<Py<Lock>>> {
        let args = AcquireArgs::parse("Client.try_acquire()", resource, ttl, None, options)?;
        let task = try_acquire(self.inner.clone(), args.resource, args.options);
        match rt::wait(py, task)?.map_err(|e| core_error(py, e))? {
            None => Ok(None),
            Some(lock) => Lock::create(py, LockInner::new(lock.claim(), args.on_lost)).map(Some),
        }
    }

    /// A context manager that acquires on entry (same arguments as
    /// `acquire`) and releases on exit: `with client.lock("jobs:1", ttl=10) as lock:`.
    #[pyo3(signature = (resource, ttl=None, wait=None, **options))]
    fn lock(
        slf: Py<Self>,
        resource: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<LockContext> {
        let args = AcquireArgs::parse("Client.lock()", resource, ttl, wait, options)?;
        Ok(LockContext::new(Acquirer::Lock(slf, args)))
    }

    /// The counting semaphore `name` with `permits` permits (1 to
    /// `MAX_PERMITS`): at most that many holders at once, each holding a
    /// `Lock`. No I/O; every client of a semaphore must give the same
    /// number of permits while it is in use.
    ///
    /// Raises `InvalidArgumentError` for a bad name or number of permits.
    fn semaphore(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        permits: &Bound<'_, PyAny>,
    ) -> PyResult<Semaphore> {
        let name = text_arg(name, "name")?;
        let permits = permits_arg(permits, &name)?;
        let inner = self
            .inner
            .semaphore(&name, permits)
            .map_err(|e| core_error(py, e))?;
        Ok(Semaphore::new(inner))
    }

    /// The read-write lock `name`: any number of readers at once, or one
    /// writer, each holding a `Lock`. No I/O.
    ///
    /// Raises `InvalidArgumentError` for a bad name.
    fn rw_lock(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<RwLock> {
        let name = text_arg(name, "name")?;
        let inner = self.inner.rw_lock(&name).map_err(|e| core_error(py, e))?;
        Ok(RwLock::new(inner))
    }

    /// Campaigns to lead the election `name`: waits in line (woken by push)
    /// until elected, then announces `value` (bytes, or str as UTF-8; at
    /// most `MAX_LEADER_VALUE` bytes) to observers and returns the
    /// `Leadership`. `ttl` is the leader's lease in seconds (renewed while
    /// it leads); `wait` bounds the wait (None: until elected).
    ///
    /// Raises `LockTimeoutError` when `wait` passed (`NotAcquiredError`
    /// when `wait` is 0), `InvalidArgumentError` for a bad name, ttl or
    /// value. An election is a lock on its name: do not lock that name
    /// for anything else.
    #[pyo3(signature = (name, ttl=None, wait=None, value=None))]
    fn campaign(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        value: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Leadership>> {
        let args = CampaignArgs::parse(name, ttl, wait, value)?;
        let task = campaign(self.inner.clone(), args.name, args.options);
        let won = rt::wait(py, task)?.map_err(|e| core_error(py, e))?;
        Leadership::create(py, won)
    }

    /// Follows the election `name`: an iterator of `Leader`s, the current
    /// one (if any), then each new one as it is elected (by push). Close it
    /// (or use `with`) to stop following.
    fn observe(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Observation> {
        Observation::start(py, &self.inner, name)
    }

    /// Writes `value` to the Redis hash `key` on the first node only if
    /// `fence` (`lock.fence`) is newer than the last write there: a larger
    /// token, or the same token from the same grant. A bare int token writes
    /// only where every stored token is older. Raises `StaleTokenError` otherwise.
    fn fenced_set(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        fence: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (key, value, token) = fenced_args(key, value, fence)?;
        let client = self.inner.clone();
        rt::wait(py, async move { client.fenced_set(&key, &value, token).await })?
            .map_err(|e| core_error(py, e))
    }

    /// Reads what `fenced_set` stored: `(value, fencing_token)`, or None.
    fn fenced_get(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<(String, u64)>> {
        let key = text_arg(key, "key")?;
        let client = self.inner.clone();
        rt::wait(py, async move { client.fenced_get(&key).await })?.map_err(|e| core_error(py, e))
    }

    /// Each node's view of `resource`: a list of dicts with `node`, `held`,
    /// `ttl` (seconds or None), `fencing_counter` and `error`.
    fn inspect(&self, py: Python<'_>, resource: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let resource = resource_arg(resource)?;
        let client = self.inner.clone();
        let states =
            rt::wait(py, async move { client.inspect(&resource).await })?.map_err(|e| core_error(py, e))?;
        inspect_py(py, states)
    }

    /// What this client counted since it was made, as a plain dict (no I/O):
    /// `acquired`, `failed` (error kind -> count, every kind), `lost`
    /// (loss reason -> count, every reason), `released`, `renewals`,
    /// `renewal_failures`, the gauges `held` and `waiting`, and
    /// `acquire_latency` (`count`, `sum` in seconds, `buckets` as
    /// `(upper bound in seconds, cumulative count)` tuples, `p50` and `p99`
    /// in seconds or None). Every acquire call counts, permits and read-write
    /// grants included; a refused `try_acquire` counts as failed `not_acquired`.
    fn metrics(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        metrics_py(py, self.inner.metrics())
    }

    /// The nodes, as URLs without passwords.
    #[getter]
    fn nodes(&self) -> Vec<String> {
        self.inner.nodes()
    }

    /// How many nodes must agree: `len(nodes) // 2 + 1`.
    #[getter]
    fn quorum(&self) -> usize {
        self.inner.quorum()
    }

    /// Refuses new operations from now on (they raise `ClosedError`). Held locks
    /// can still be released.
    fn close(&self) {
        self.inner.close();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc_value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.inner.close();
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "<fencelock.Client nodes={:?} quorum={}>",
            self.inner.nodes(),
            self.inner.quorum()
        )
    }
}

impl Client {
    /// Acquires (GIL released) and wraps the lock for Python.
    fn acquire_with(&self, py: Python<'_>, args: AcquireArgs) -> PyResult<Py<Lock>> {
        let task = acquire(self.inner.clone(), args.resource, args.options);
        let lock = rt::wait(py, task)?.map_err(|e| core_error(py, e))?;
        Lock::create(py, LockInner::new(lock.claim(), args.on_lost))
    }
}

/// What a `LockContext` acquires on entry.
pub(crate) enum Acquirer {
    /// `Client.lock(...)`: the lock on a resource.
    Lock(Py<Client>, AcquireArgs),
    /// `Semaphore.permit(...)`: a permit of the semaphore.
    Permit(fencelock::Semaphore, PermitArgs),
    /// `RwLock.read(...)` or `RwLock.write(...)`: a reader's or the writer's grant.
    Rw(fencelock::RwLock, RwMode, PermitArgs),
}

/// Returned by `Client.lock(...)`, `Semaphore.permit(...)`, `RwLock.read(...)`
/// and `RwLock.write(...)`: acquires on `__enter__`, releases on `__exit__`.
#[pyclass(module = "fencelock", frozen)]
pub struct LockContext {
    acquirer: Acquirer,
    lock: Mutex<Option<Py<Lock>>>,
}

impl LockContext {
    /// A context that acquires what `acquirer` says on entry.
    pub(crate) fn new(acquirer: Acquirer) -> Self {
        LockContext {
            acquirer,
            lock: Mutex::new(None),
        }
    }
}

#[pymethods]
impl LockContext {
    fn __enter__(&self, py: Python<'_>) -> PyResult<Py<Lock>> {
        let lock = match &self.acquirer {
            Acquirer::Lock(client, args) => client.get().acquire_with(py, args.clone_ref(py))?,
            Acquirer::Permit(sem, args) => semaphore::acquire_blocking(py, sem, args.clone_ref(py))?,
            Acquirer::Rw(rw, mode, args) => rw_lock::acquire_blocking(py, rw, *mode, args.clone_ref(py))?,
        };
        *self.lock.lock().unwrap_or_else(|p| p.into_inner()) = Some(lock.clone_ref(py));
        Ok(lock)
    }

    /// Releases the lock; a release error is raised only when the block
    /// itself finished without an exception.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        _exc_value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let lock = self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(lock) = lock {
            let result = Lock::release_now(lock.bind(py));
            if exc_type.is_none() {
                result?;
            }
        }
        Ok(false)
    }
}

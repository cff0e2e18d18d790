//! `Client` (sync), `AsyncClient` (asyncio) and the `lock(...)` context managers.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyType};

use fencelock::{ErrorKind, LockOptions, Unclaimed};

use crate::args::{AcquireArgs, ClientArgs};
use crate::errors::{core_error, invalid};
use crate::fence::fence_arg;
use crate::lock::{AsyncLock, Lock, LockInner};
use crate::rt::{self, Deferred};

/// Connects (GIL released) and returns the core client.
fn connect(
    py: Python<'_>,
    nodes: &Bound<'_, PyAny>,
    args: ClientArgs<'_, '_>,
) -> PyResult<fencelock::Client> {
    let builder = args.builder(nodes)?;
    rt::wait(py, builder.build())?.map_err(|e| core_error(py, e))
}

fn text_arg(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    obj.extract::<String>().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!("{name} must be str, not {}", type_name(obj)))
    })
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

fn resource_arg(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    text_arg(obj, "resource")
}

fn fenced_args(
    key: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    fence: &Bound<'_, PyAny>,
) -> PyResult<(String, String, fencelock::Fence)> {
    Ok((
        text_arg(key, "key")?,
        text_arg(value, "value")?,
        fence_arg(fence)?,
    ))
}

fn inspect_py(py: Python<'_>, states: Vec<fencelock::NodeLockState>) -> PyResult<Py<PyAny>> {
    let list = PyList::empty(py);
    for s in states {
        let d = PyDict::new(py);
        d.set_item("node", s.node)?;
        d.set_item("held", s.held)?;
        d.set_item("ttl", s.ttl_ms.map(|ms| ms as f64 / 1000.0))?;
        d.set_item("fencing_counter", s.fencing_counter)?;
        d.set_item("error", s.error)?;
        list.append(d)?;
    }
    Ok(list.into_any().unbind())
}

fn fenced_get_py(py: Python<'_>, value: Option<(String, u64)>) -> PyResult<Py<PyAny>> {
    Ok(value.into_pyobject(py)?.into_any().unbind())
}

/// The core's `try_acquire`: `None` when held by someone else. The lock
/// travels [`Unclaimed`] until a Python object holds it, so a wait given up
/// at the moment of the grant (Ctrl-C, a cancelled task) releases it.
async fn try_acquire(
    client: fencelock::Client,
    resource: String,
    options: LockOptions,
) -> fencelock::Result<Option<Unclaimed>> {
    Ok(client.try_acquire(&resource, options).await?.map(Unclaimed::new))
}

/// The core's `acquire`, the lock [`Unclaimed`] as in [`try_acquire`].
async fn acquire(
    client: fencelock::Client,
    resource: String,
    options: LockOptions,
) -> fencelock::Result<Unclaimed> {
    client.acquire(&resource, options).await.map(Unclaimed::new)
}

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
    inner: fencelock::Client,
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (
        nodes, *, key_prefix=None, node_timeout=None, connect_timeout=None, drift_factor=None,
        retry=None, default_ttl=None, default_wait=None, auto_renew=None, username=None,
        password=None, tls_ca_pem=None, tls_client_cert_pem=None, tls_client_key_pem=None,
        tls_min_version=None, allow_mixed_tls=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        nodes: &Bound<'_, PyAny>,
        key_prefix: Option<String>,
        node_timeout: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        drift_factor: Option<&Bound<'_, PyAny>>,
        retry: Option<&Bound<'_, PyAny>>,
        default_ttl: Option<&Bound<'_, PyAny>>,
        default_wait: Option<&Bound<'_, PyAny>>,
        auto_renew: Option<bool>,
        username: Option<String>,
        password: Option<String>,
        tls_ca_pem: Option<&Bound<'_, PyAny>>,
        tls_client_cert_pem: Option<&Bound<'_, PyAny>>,
        tls_client_key_pem: Option<&Bound<'_, PyAny>>,
        tls_min_version: Option<&Bound<'_, PyAny>>,
        allow_mixed_tls: Option<bool>,
    ) -> PyResult<Self> {
        let args = ClientArgs {
            key_prefix,
            node_timeout,
            connect_timeout,
            drift_factor,
            retry,
            default_ttl,
            default_wait,
            auto_renew,
            username,
            password,
            tls_ca_pem,
            tls_client_cert_pem,
            tls_client_key_pem,
            tls_min_version,
            allow_mixed_tls,
        };
        Ok(Client {
            inner: connect(py, nodes, args)?,
        })
    }

    /// Takes the lock on `resource`, retrying while it is held elsewhere for
    /// up to `wait` seconds. `ttl` is the lease in seconds (renewed every
    /// ttl/3 while held unless `auto_renew=False`).
    ///
    /// Raises `LockTimeoutError` when `wait` passed (`NotAcquiredError` when `wait` is
    /// 0), `UnavailableError` when a majority of nodes cannot be reached.
    #[pyo3(signature = (resource, ttl=None, wait=None, *, auto_renew=None, max_hold=None, max_renewals=None, on_lost=None))]
    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &self,
        py: Python<'_>,
        resource: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        auto_renew: Option<bool>,
        max_hold: Option<&Bound<'_, PyAny>>,
        max_renewals: Option<&Bound<'_, PyAny>>,
        on_lost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Lock>> {
        let resource = resource_arg(resource)?;
        let args = AcquireArgs::parse(ttl, wait, auto_renew, max_hold, max_renewals, on_lost)?;
        self.acquire_with(py, resource, args)
    }

    /// One attempt: the lock, or None when it is held by someone else.
    #[pyo3(signature = (resource, ttl=None, *, auto_renew=None, max_hold=None, max_renewals=None, on_lost=None))]
    #[allow(clippy::too_many_arguments)]
    fn try_acquire(
        &self,
        py: Python<'_>,
        resource: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        auto_renew: Option<bool>,
        max_hold: Option<&Bound<'_, PyAny>>,
        max_renewals: Option<&Bound<'_, PyAny>>,
        on_lost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<Lock>>> {
        let resource = resource_arg(resource)?;
        let args = AcquireArgs::parse(ttl, None, auto_renew, max_hold, max_renewals, on_lost)?;
        let task = try_acquire(self.inner.clone(), resource, args.options);
        match rt::wait(py, task)?.map_err(|e| core_error(py, e))? {
            None => Ok(None),
            Some(lock) => Lock::create(py, LockInner::new(lock.claim(), args.on_lost)).map(Some),
        }
    }

    /// A context manager that acquires on entry (same arguments as
    /// `acquire`) and releases on exit: `with client.lock("jobs:1", ttl=10) as lock:`.
    #[pyo3(signature = (resource, ttl=None, wait=None, *, auto_renew=None, max_hold=None, max_renewals=None, on_lost=None))]
    #[allow(clippy::too_many_arguments)]
    fn lock(
        slf: Py<Self>,
        resource: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        auto_renew: Option<bool>,
        max_hold: Option<&Bound<'_, PyAny>>,
        max_renewals: Option<&Bound<'_, PyAny>>,
        on_lost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<LockContext> {
        let resource = resource_arg(resource)?;
        let args = AcquireArgs::parse(ttl, wait, auto_renew, max_hold, max_renewals, on_lost)?;
        Ok(LockContext {
            client: slf,
            resource,
            args,
            lock: Mutex::new(None),
        })
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

    /// Benchmark helper: `cycles` acquire+release cycles run in the core
    /// itself by `concurrency` tasks (each on its own resource), with no
    /// Python in the loop. Returns the elapsed seconds.
    #[pyo3(signature = (prefix, cycles, concurrency=1, ttl=10.0))]
    fn _bench_core(
        &self,
        py: Python<'_>,
        prefix: String,
        cycles: usize,
        concurrency: usize,
        ttl: f64,
    ) -> PyResult<f64> {
        let concurrency = concurrency.max(1);
        let ttl = Duration::try_from_secs_f64(ttl).map_err(|e| invalid(py, e.to_string()))?;
        let client = self.inner.clone();
        let run = async move {
            let started = Instant::now();
            let mut tasks = Vec::new();
            for t in 0..concurrency {
                let (client, resource) = (client.clone(), format!("{prefix}:{t}"));
                let n = cycles / concurrency + usize::from(t < cycles % concurrency);
                tasks.push(tokio::spawn(async move {
                    for _ in 0..n {
                        let lock = client
                            .acquire(&resource, LockOptions::new(ttl).wait(Duration::ZERO))
                            .await?;
                        lock.release().await?;
                    }
                    Ok::<(), fencelock::Error>(())
                }));
            }
            for task in tasks {
                task.await
                    .map_err(|e| fencelock::Error::new(ErrorKind::Closed, e.to_string()))??;
            }
            Ok::<f64, fencelock::Error>(started.elapsed().as_secs_f64())
        };
        rt::wait(py, run)?.map_err(|e| core_error(py, e))
    }
}

impl Client {
    fn acquire_with(&self, py: Python<'_>, resource: String, args: AcquireArgs) -> PyResult<Py<Lock>> {
        let task = acquire(self.inner.clone(), resource, args.options);
        let lock = rt::wait(py, task)?.map_err(|e| core_error(py, e))?;
        Lock::create(py, LockInner::new(lock.claim(), args.on_lost))
    }
}

/// Returned by `Client.lock(...)`: acquires on `__enter__`, releases on `__exit__`.
#[pyclass(module = "fencelock", frozen)]
pub struct LockContext {
    client: Py<Client>,
    resource: String,
    args: AcquireArgs,
    lock: Mutex<Option<Py<Lock>>>,
}

#[pymethods]
impl LockContext {
    fn __enter__(&self, py: Python<'_>) -> PyResult<Py<Lock>> {
        let lock = self
            .client
            .get()
            .acquire_with(py, self.resource.clone(), self.args.clone_ref(py))?;
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
            let result = lock.get().release_now(py);
            if exc_type.is_none() {
                result?;
            }
        }
        Ok(false)
    }
}

/// The asyncio twin of `Client`: the same calls as coroutines, on the same
/// internal runtime. Cancelling the task awaiting `acquire` cancels the
/// attempt and undoes any partial grant.
///
/// The constructor connects (briefly blocking, GIL released, at most
/// `connect_timeout`); `await AsyncClient.connect(...)` does the same
/// without blocking the event loop.
#[pyclass(module = "fencelock", frozen)]
pub struct AsyncClient {
    inner: fencelock::Client,
}

#[pymethods]
impl AsyncClient {
    #[new]
    #[pyo3(signature = (
        nodes, *, key_prefix=None, node_timeout=None, connect_timeout=None, drift_factor=None,
        retry=None, default_ttl=None, default_wait=None, auto_renew=None, username=None,
        password=None, tls_ca_pem=None, tls_client_cert_pem=None, tls_client_key_pem=None,
        tls_min_version=None, allow_mixed_tls=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        nodes: &Bound<'_, PyAny>,
        key_prefix: Option<String>,
        node_timeout: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        drift_factor: Option<&Bound<'_, PyAny>>,
        retry: Option<&Bound<'_, PyAny>>,
        default_ttl: Option<&Bound<'_, PyAny>>,
        default_wait: Option<&Bound<'_, PyAny>>,
        auto_renew: Option<bool>,
        username: Option<String>,
        password: Option<String>,
        tls_ca_pem: Option<&Bound<'_, PyAny>>,
        tls_client_cert_pem: Option<&Bound<'_, PyAny>>,
        tls_client_key_pem: Option<&Bound<'_, PyAny>>,
        tls_min_version: Option<&Bound<'_, PyAny>>,
        allow_mixed_tls: Option<bool>,
    ) -> PyResult<Self> {
        let args = ClientArgs {
            key_prefix,
            node_timeout,
            connect_timeout,
            drift_factor,
            retry,
            default_ttl,
            default_wait,
            auto_renew,
            username,
            password,
            tls_ca_pem,
            tls_client_cert_pem,
            tls_client_key_pem,
            tls_min_version,
            allow_mixed_tls,
        };
        Ok(AsyncClient {
            inner: connect(py, nodes, args)?,
        })
    }

    /// Coroutine: connects without blocking the event loop and returns the
    /// client. Takes the same arguments as the constructor.
    #[classmethod]
    #[pyo3(signature = (
        nodes, *, key_prefix=None, node_timeout=None, connect_timeout=None, drift_factor=None,
        retry=None, default_ttl=None, default_wait=None, auto_renew=None, username=None,
        password=None, tls_ca_pem=None, tls_client_cert_pem=None, tls_client_key_pem=None,
        tls_min_version=None, allow_mixed_tls=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn connect<'py>(
        _cls: &Bound<'py, PyType>,
        py: Python<'py>,
        nodes: &Bound<'py, PyAny>,
        key_prefix: Option<String>,
        node_timeout: Option<&Bound<'py, PyAny>>,
        connect_timeout: Option<&Bound<'py, PyAny>>,
        drift_factor: Option<&Bound<'py, PyAny>>,
        retry: Option<&Bound<'py, PyAny>>,
        default_ttl: Option<&Bound<'py, PyAny>>,
        default_wait: Option<&Bound<'py, PyAny>>,
        auto_renew: Option<bool>,
        username: Option<String>,
        password: Option<String>,
        tls_ca_pem: Option<&Bound<'py, PyAny>>,
        tls_client_cert_pem: Option<&Bound<'py, PyAny>>,
        tls_client_key_pem: Option<&Bound<'py, PyAny>>,
        tls_min_version: Option<&Bound<'py, PyAny>>,
        allow_mixed_tls: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = ClientArgs {
            key_prefix,
            node_timeout,
            connect_timeout,
            drift_factor,
            retry,
            default_ttl,
            default_wait,
            auto_renew,
            username,
            password,
            tls_ca_pem,
            tls_client_cert_pem,
            tls_client_key_pem,
            tls_min_version,
            allow_mixed_tls,
        };
        let builder = args.builder(nodes)?;
        rt::awaitable(py, async move {
            Deferred::result(builder.build().await, |py, inner| {
                Ok(Py::new(py, AsyncClient { inner })?.into_any())
            })
        })
    }

    /// Coroutine: takes the lock on `resource`, retrying while it is held
    /// elsewhere for up to `wait` seconds; returns an `AsyncLock`.
    #[pyo3(signature = (resource, ttl=None, wait=None, *, auto_renew=None, max_hold=None, max_renewals=None, on_lost=None))]
    #[allow(clippy::too_many_arguments)]
    fn acquire<'py>(
        &self,
        py: Python<'py>,
        resource: &Bound<'py, PyAny>,
        ttl: Option<&Bound<'py, PyAny>>,
        wait: Option<&Bound<'py, PyAny>>,
        auto_renew: Option<bool>,
        max_hold: Option<&Bound<'py, PyAny>>,
        max_renewals: Option<&Bound<'py, PyAny>>,
        on_lost: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let resource = resource_arg(resource)?;
        let args = AcquireArgs::parse(ttl, wait, auto_renew, max_hold, max_renewals, on_lost)?;
        acquire_awaitable(py, self.inner.clone(), resource, args)
    }

    /// Coroutine: one attempt; the `AsyncLock`, or None when held by someone else.
    #[pyo3(signature = (resource, ttl=None, *, auto_renew=None, max_hold=None, max_renewals=None, on_lost=None))]
    #[allow(clippy::too_many_arguments)]
    fn try_acquire<'py>(
        &self,
        py: Python<'py>,
        resource: &Bound<'py, PyAny>,
        ttl: Option<&Bound<'py, PyAny>>,
        auto_renew: Option<bool>,
        max_hold: Option<&Bound<'py, PyAny>>,
        max_renewals: Option<&Bound<'py, PyAny>>,
        on_lost: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let resource = resource_arg(resource)?;
        let args = AcquireArgs::parse(ttl, None, auto_renew, max_hold, max_renewals, on_lost)?;
        let task = try_acquire(self.inner.clone(), resource, args.options);
        let on_lost = args.on_lost;
        rt::awaitable(py, async move {
            Deferred::result(task.await, move |py, lock| match lock {
                None => Ok(py.None()),
                Some(lock) => Ok(AsyncLock::create(py, LockInner::new(lock.claim(), on_lost))?.into_any()),
            })
        })
    }

    /// An async context manager that acquires on entry (same arguments as
    /// `acquire`) and releases on exit: `async with client.lock("jobs:1", ttl=10) as lock:`.
    #[pyo3(signature = (resource, ttl=None, wait=None, *, auto_renew=None, max_hold=None, max_renewals=None, on_lost=None))]
    #[allow(clippy::too_many_arguments)]
    fn lock(
        &self,
        resource: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        wait: Option<&Bound<'_, PyAny>>,
        auto_renew: Option<bool>,
        max_hold: Option<&Bound<'_, PyAny>>,
        max_renewals: Option<&Bound<'_, PyAny>>,
        on_lost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<AsyncLockContext> {
        let resource = resource_arg(resource)?;
        let args = AcquireArgs::parse(ttl, wait, auto_renew, max_hold, max_renewals, on_lost)?;
        Ok(AsyncLockContext {
            client: self.inner.clone(),
            resource,
            args,
            lock: Arc::new(Mutex::new(None)),
        })
    }

    /// Coroutine: the fenced write of `Client.fenced_set`.
    fn fenced_set<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
        fence: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (key, value, token) = fenced_args(key, value, fence)?;
        let client = self.inner.clone();
        rt::awaitable(py, async move {
            Deferred::result(client.fenced_set(&key, &value, token).await, |py, ()| {
                Ok(py.None())
            })
        })
    }

    /// Coroutine: what `fenced_set` stored, `(value, fencing_token)`, or None.
    fn fenced_get<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let key = text_arg(key, "key")?;
        let client = self.inner.clone();
        rt::awaitable(py, async move {
            Deferred::result(client.fenced_get(&key).await, fenced_get_py)
        })
    }

    /// Coroutine: each node's view of `resource` (see `Client.inspect`).
    fn inspect<'py>(&self, py: Python<'py>, resource: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let resource = resource_arg(resource)?;
        let client = self.inner.clone();
        rt::awaitable(py, async move {
            Deferred::result(client.inspect(&resource).await, inspect_py)
        })
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

    /// Refuses new operations from now on (they raise `ClosedError`).
    fn close(&self) {
        self.inner.close();
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let me: Py<PyAny> = slf.into_any().unbind();
        rt::awaitable(py, async move { Deferred::new(move |_| Ok(me)) })
    }

    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc_type: Option<&Bound<'py, PyAny>>,
        _exc_value: Option<&Bound<'py, PyAny>>,
        _traceback: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.inner.close();
        rt::awaitable(py, async move {
            Deferred::new(|py| Ok(pyo3::types::PyBool::new(py, false).to_owned().into_any().unbind()))
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<fencelock.AsyncClient nodes={:?} quorum={}>",
            self.inner.nodes(),
            self.inner.quorum()
        )
    }
}

fn acquire_awaitable<'py>(
    py: Python<'py>,
    client: fencelock::Client,
    resource: String,
    args: AcquireArgs,
) -> PyResult<Bound<'py, PyAny>> {
    let task = acquire(client, resource, args.options);
    let on_lost = args.on_lost;
    rt::awaitable(py, async move {
        Deferred::result(task.await, move |py, lock| {
            Ok(AsyncLock::create(py, LockInner::new(lock.claim(), on_lost))?.into_any())
        })
    })
}

/// Returned by `AsyncClient.lock(...)`: acquires on `__aenter__`, releases on `__aexit__`.
#[pyclass(module = "fencelock", frozen)]
pub struct AsyncLockContext {
    client: fencelock::Client,
    resource: String,
    args: AcquireArgs,
    lock: Arc<Mutex<Option<Py<AsyncLock>>>>,
}

#[pymethods]
impl AsyncLockContext {
    fn __aenter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let task = acquire(
            self.client.clone(),
            self.resource.clone(),
            self.args.options.clone(),
        );
        let on_lost = self.args.on_lost.as_ref().map(|c| c.clone_ref(py));
        let slot = self.lock.clone();
        rt::awaitable(py, async move {
            Deferred::result(task.await, move |py, lock| {
                let lock = AsyncLock::create(py, LockInner::new(lock.claim(), on_lost))?;
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(lock.clone_ref(py));
                Ok(lock.into_any())
            })
        })
    }

    /// Releases the lock; a release error is raised only when the block
    /// itself finished without an exception.
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        exc_type: Option<&Bound<'py, PyType>>,
        _exc_value: Option<&Bound<'py, PyAny>>,
        _traceback: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
        match lock {
            Some(lock) => lock.get().release_awaitable(py, exc_type.is_some()),
            None => rt::awaitable(py, async move { Deferred::new(|py| Ok(py.None())) }),
        }
    }
}

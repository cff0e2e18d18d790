//! `fencelock._native`: the compiled part of the `fencelock` Python package.
//!
//! Every call runs on the Rust core's one internal tokio runtime. The sync
//! API (`Client`, `Lock`) waits with the GIL released and lets Ctrl-C
//! interrupt a wait on the main thread; the asyncio API (`AsyncClient`,
//! `AsyncLock`) hands out awaitables through pyo3-async-runtimes' generic
//! bridge, driven by that same runtime. Leader election (`campaign`,
//! `observe`) hands out leaderships built on the lock classes, counting
//! semaphores (`semaphore`) hand out their permits as locks, and read-write
//! locks (`rw_lock`) their readers' and writers' grants; `metrics()` gives
//! a client's counters as a dict; the core's events reach Python's
//! `logging` through `logs` (wrapped by `fencelock/_logging.py`). The
//! exception classes are plain Python (`fencelock/_errors.py`).

mod args;
mod async_client;
mod asyncio;
mod bench;
#[cfg(unix)]
mod bridge;
mod calls;
mod coroutine;
mod election;
mod errors;
mod fence;
mod lock;
mod logs;
mod metrics;
mod observe;
mod rt;
mod rw_lock;
mod semaphore;
mod sync_client;

use pyo3::prelude::*;

/// Waits (GIL released) up to `timeout` seconds until no client of this
/// process has clean-up running in the background (the release of a lock
/// granted to a wait given up at that moment, the undo of an abandoned
/// attempt); True when done. Registered with `atexit` by the package.
#[pyfunction]
#[pyo3(signature = (timeout = 2.0))]
fn settle(py: Python<'_>, timeout: f64) -> PyResult<bool> {
    if fencelock::is_settled() {
        return Ok(true);
    }
    let limit = std::time::Duration::try_from_secs_f64(timeout).map_err(|_| {
        errors::invalid(
            py,
            format!("timeout must be a duration in seconds, not {timeout}"),
        )
    })?;
    let settled = rt::wait(py, async move {
        tokio::time::timeout(limit, fencelock::settle()).await.is_ok()
    })?;
    Ok(settled)
}

/// The compiled module: clients, locks, the lost-lock signal, leader
/// election, counting semaphores and read-write locks.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    rt::record_main_thread(m.py())?;
    m.add_class::<sync_client::Client>()?;
    m.add_class::<async_client::AsyncClient>()?;
    m.add_class::<sync_client::LockContext>()?;
    m.add_class::<async_client::AsyncLockContext>()?;
    m.add_class::<lock::Lock>()?;
    m.add_class::<lock::AsyncLock>()?;
    m.add_class::<lock::LostSignal>()?;
    m.add_class::<fence::Fence>()?;
    m.add_class::<election::Leadership>()?;
    m.add_class::<election::AsyncLeadership>()?;
    m.add_class::<observe::Leader>()?;
    m.add_class::<observe::Observation>()?;
    m.add_class::<observe::AsyncObservation>()?;
    m.add_class::<semaphore::Semaphore>()?;
    m.add_class::<semaphore::AsyncSemaphore>()?;
    m.add_class::<rw_lock::RwLock>()?;
    m.add_class::<rw_lock::AsyncRwLock>()?;
    m.add_function(wrap_pyfunction!(settle, m)?)?;
    logs::register(m)?;
    // Private names: set as attributes, left out of `__all__`.
    m.setattr("_LockBase", m.py().get_type::<lock::LockBase>())?;
    m.setattr("_LeadershipBase", m.py().get_type::<election::LeadershipBase>())?;
    m.setattr("_bench_core", wrap_pyfunction!(bench::_bench_core, m)?)?;
    // Whether the module was built with debug assertions (cargo's dev profile):
    // the benchmarks refuse such a build, which scripts/test-python.sh installs.
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    m.setattr("_build_profile", profile)?;
    m.add("MIN_TTL", fencelock::MIN_TTL.as_secs_f64())?;
    m.add("MAX_TTL", fencelock::MAX_TTL.as_secs_f64())?;
    m.add("MAX_WAIT", fencelock::MAX_WAIT.as_secs_f64())?;
    m.add("MAX_RESOURCE_LEN", fencelock::MAX_RESOURCE_LEN)?;
    m.add("MAX_PREFIX_LEN", fencelock::MAX_PREFIX_LEN)?;
    m.add("MAX_DRIFT_FACTOR", fencelock::MAX_DRIFT_FACTOR)?;
    m.add("MAX_FENCING_TOKEN", fencelock::MAX_FENCING_TOKEN)?;
    m.add("MAX_HOLDER_ID", fencelock::MAX_HOLDER_ID)?;
    m.add("MAX_LEADER_VALUE", fencelock::MAX_LEADER_VALUE)?;
    m.add("MAX_PERMITS", fencelock::MAX_PERMITS)?;
    m.add("METRIC_NAMES", metrics::metric_names(m.py())?)?;
    m.add("LATENCY_BUCKETS", metrics::latency_buckets(m.py())?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

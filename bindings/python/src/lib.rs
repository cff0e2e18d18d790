//! `fencelock._native`: the compiled part of the `fencelock` Python package.
//!
//! Every call runs on the Rust core's one internal tokio runtime. The sync
//! API (`Client`, `Lock`) waits with the GIL released and lets Ctrl-C
//! interrupt a wait on the main thread; the asyncio API (`AsyncClient`,
//! `AsyncLock`) hands out awaitables through pyo3-async-runtimes' generic
//! bridge, driven by that same runtime. The exception classes are plain
//! Python (`fencelock/_errors.py`).

mod args;
#[cfg(unix)]
mod bridge;
mod client;
mod errors;
mod lock;
mod rt;

use pyo3::prelude::*;

/// The compiled module: clients, locks and the lost-lock signal.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    rt::record_main_thread(m.py())?;
    m.add_class::<client::Client>()?;
    m.add_class::<client::AsyncClient>()?;
    m.add_class::<client::LockContext>()?;
    m.add_class::<client::AsyncLockContext>()?;
    m.add_class::<lock::Lock>()?;
    m.add_class::<lock::AsyncLock>()?;
    m.add_class::<lock::LostSignal>()?;
    m.add("MIN_TTL", fencelock::MIN_TTL.as_secs_f64())?;
    m.add("MAX_TTL", fencelock::MAX_TTL.as_secs_f64())?;
    m.add("MAX_RESOURCE_LEN", fencelock::MAX_RESOURCE_LEN)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

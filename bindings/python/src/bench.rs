//! `_native._bench_core`: the benchmark's ceiling, the Rust core alone.

use std::time::{Duration, Instant};

use pyo3::prelude::*;

use fencelock::{ErrorKind, LockOptions};

use crate::errors::{core_error, invalid};
use crate::rt;
use crate::sync_client::Client;

/// Benchmark helper (bench/bench.py): `cycles` acquire+release cycles of
/// `client` run in the core itself by `concurrency` tasks (each on its own
/// resource under `prefix`), with no Python in the loop. Returns the
/// elapsed seconds.
#[pyfunction]
#[pyo3(signature = (client, prefix, cycles, concurrency=1, ttl=10.0))]
pub(crate) fn _bench_core(
    py: Python<'_>,
    client: &Bound<'_, Client>,
    prefix: String,
    cycles: usize,
    concurrency: usize,
    ttl: f64,
) -> PyResult<f64> {
    let concurrency = concurrency.max(1);
    let ttl = Duration::try_from_secs_f64(ttl).map_err(|e| invalid(py, e.to_string()))?;
    let client = client.get().inner.clone();
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

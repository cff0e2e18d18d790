//! `Client.metrics()` and `AsyncClient.metrics()`: the core's snapshot of a
//! client's counters as a plain dict, durations in seconds; and the module's
//! `METRIC_NAMES` and `LATENCY_BUCKETS`, which `fencelock.prometheus` exports
//! them under.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

/// The snapshot as a dict: `acquired`, `failed` (kind → count, every kind),
/// `lost` (reason → count, every reason), `released`, `renewals`,
/// `renewal_failures`, `held`, `waiting` and `acquire_latency` (a dict:
/// `count`, `sum` in seconds, `buckets` as `(upper bound in seconds,
/// cumulative count)` tuples, `p50` and `p99` in seconds or None).
pub(crate) fn metrics_py(py: Python<'_>, m: fencelock::Metrics) -> PyResult<Py<PyAny>> {
    let d = PyDict::new(py);
    d.set_item("acquired", m.acquired)?;
    let failed = PyDict::new(py);
    for (kind, n) in &m.failed {
        failed.set_item(kind.as_str(), n)?;
    }
    d.set_item("failed", failed)?;
    let lost = PyDict::new(py);
    for (reason, n) in &m.lost {
        lost.set_item(reason.name(), n)?;
    }
    d.set_item("lost", lost)?;
    d.set_item("released", m.released)?;
    d.set_item("renewals", m.renewals)?;
    d.set_item("renewal_failures", m.renewal_failures)?;
    d.set_item("held", m.held)?;
    d.set_item("waiting", m.waiting)?;
    d.set_item("acquire_latency", latency_py(py, &m.acquire_latency)?)?;
    Ok(d.into_any().unbind())
}

fn latency_py<'py>(py: Python<'py>, latency: &fencelock::Latency) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("count", latency.count)?;
    d.set_item("sum", latency.sum.as_secs_f64())?;
    let buckets = PyList::empty(py);
    // The bounds as the constant has them (the same floats as `LATENCY_BUCKETS`).
    for (bound, (_, below)) in fencelock::LATENCY_BUCKETS.iter().zip(&latency.buckets) {
        buckets.append((*bound, *below))?;
    }
    d.set_item("buckets", buckets)?;
    d.set_item("p50", latency.quantile(0.5).map(|q| q.as_secs_f64()))?;
    d.set_item("p99", latency.quantile(0.99).map(|q| q.as_secs_f64()))?;
    Ok(d)
}

/// `METRIC_NAMES`: each key of the snapshot → the name it is exported under
/// (Prometheus style, as the core's `metrics` facade receives it).
pub(crate) fn metric_names(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    use fencelock::metric_names as names;
    let d = PyDict::new(py);
    for (key, name) in [
        ("acquired", names::ACQUIRED),
        ("failed", names::FAILED),
        ("lost", names::LOST),
        ("released", names::RELEASED),
        ("renewals", names::RENEWALS),
        ("renewal_failures", names::RENEWAL_FAILURES),
        ("held", names::HELD),
        ("waiting", names::WAITING),
        ("acquire_latency", names::ACQUIRE_LATENCY),
    ] {
        d.set_item(key, name)?;
    }
    Ok(d)
}

/// `LATENCY_BUCKETS`: the upper bounds of the acquire-latency buckets, in
/// seconds (a tuple).
pub(crate) fn latency_buckets(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    PyTuple::new(py, fencelock::LATENCY_BUCKETS)
}

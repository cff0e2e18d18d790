"""The shared protocol vectors (tests/vectors/protocol.json) through the Python front."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Dict, List

import fencelock
import pytest
import redis

VECTORS: Dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[3] / "tests" / "vectors" / "protocol.json").read_text(
        encoding="utf-8"
    )
)


@pytest.mark.parametrize("vector", VECTORS["keys"], ids=lambda v: f"{v['prefix']}|{v['resource']}")
def test_key_vector_is_the_key_the_client_writes(
    url: str, r1: "redis.Redis[str]", vector: Dict[str, Any]
) -> None:
    with fencelock.Client([url], key_prefix=vector["prefix"]) as client:
        with client.lock(vector["resource"], ttl=5, wait=2) as lock:
            owner = r1.get(vector["lock_key"])
            assert owner is not None and len(owner) == VECTORS["token"]["hex_digits"]
            assert set(owner) <= set(VECTORS["token"]["alphabet"])
            assert r1.get(vector["fence_key"]) == str(lock.fencing_token)


def _invalid_resources() -> List[str]:
    return [
        v["resource"] if "resource" in v else v["resource_repeat"] * v["times"]
        for v in VECTORS["invalid_resources"]
    ]


@pytest.mark.parametrize("resource", _invalid_resources(), ids=lambda r: repr(r[:8]))
def test_invalid_resource_vectors_are_refused(url: str, resource: str) -> None:
    with fencelock.Client([url]) as client:
        with pytest.raises(fencelock.InvalidArgumentError):
            client.try_acquire(resource, ttl=1)


def _class_name(kind: str) -> str:
    """The exception class of a kind, by the naming rule of fencelock/_errors.py."""
    camel = "".join(part.capitalize() for part in kind.split("_"))
    return {"Timeout": "LockTimeout", "Lost": "LockLost"}.get(camel, camel) + "Error"


@pytest.mark.parametrize("entry", VECTORS["error_kinds"], ids=lambda e: e["name"])
def test_every_error_kind_has_its_exception_class(entry: Dict[str, Any]) -> None:
    cls = getattr(fencelock, _class_name(entry["name"]))
    assert issubclass(cls, fencelock.FenceLockError)
    assert (cls.kind, cls.code) == (entry["name"], entry["code"])
    # CancelledError stays out of `import *`, where it would shadow asyncio's.
    assert (cls.__name__ in fencelock.__all__) == (cls is not fencelock.CancelledError)
    made = fencelock._errors._from_core(entry["name"], entry["code"], "message", "r", [])
    assert type(made) is cls


def test_import_star_leaves_asyncio_cancelled_error_alone() -> None:
    scope: Dict[str, Any] = {}
    exec("from asyncio import *\nfrom fencelock import *", scope)
    assert scope["CancelledError"] is asyncio.CancelledError
    assert {
        "Client",
        "AsyncClient",
        "settle",
        "MIN_TTL",
        "ClosedError",
        "__version__",
    } <= scope.keys()


def test_the_exception_classes_are_exactly_the_kinds() -> None:
    classes = {cls.kind: cls.code for cls in fencelock.FenceLockError.__subclasses__()}
    assert classes == {e["name"]: e["code"] for e in VECTORS["error_kinds"]}


def test_loss_reasons_and_node_outcomes_are_the_vectors(
    url: str, r1: "redis.Redis[str]", resource: str
) -> None:
    names = {v["name"] for v in VECTORS["loss_reasons"]}
    with fencelock.Client([url]) as client:
        lock = client.acquire(resource, ttl=0.3, wait=0, auto_renew=False)
        lock.lost.wait(2)
        assert lock.lost.reason == "expired" and lock.lost.reason in names
        with pytest.raises(fencelock.NotAcquiredError) as err:
            r1.set(f"fencelock:{{{resource}}}", "someone-else", px=5000)
            client.acquire(resource, ttl=5, wait=0)
        outcomes = {v["name"] for v in VECTORS["node_outcomes"]}
        assert [n.outcome for n in err.value.nodes] == ["held_by_other"]
        assert {n.outcome for n in err.value.nodes} <= outcomes


def test_limits_are_the_vectors() -> None:
    limits = VECTORS["limits"]
    assert fencelock.MIN_TTL * 1000 == limits["min_ttl_ms"]
    assert fencelock.MAX_TTL * 1000 == limits["max_ttl_ms"]
    assert fencelock.MAX_WAIT * 1000 == limits["max_wait_ms"]
    assert fencelock.MAX_RESOURCE_LEN == limits["max_resource_bytes"]
    assert fencelock.MAX_PREFIX_LEN == limits["max_prefix_bytes"]
    assert fencelock.MAX_DRIFT_FACTOR == limits["max_drift_factor"]
    assert fencelock.MAX_FENCING_TOKEN == limits["max_fencing_token"]
    assert fencelock.MAX_HOLDER_ID == limits["max_holder_id"]
    assert fencelock.MAX_PERMITS == limits["max_permits"]


def test_metrics_are_the_vectors(url: str) -> None:
    table = VECTORS["metrics"]
    with fencelock.Client([url]) as client:
        snapshot = client.metrics()
    assert list(snapshot) == table["fields"]
    assert list(fencelock.AsyncClient([url]).metrics()) == table["fields"]
    assert list(fencelock.Metrics.__annotations__) == table["fields"]
    assert list(snapshot["failed"]) == [e["name"] for e in VECTORS["error_kinds"]]
    assert list(snapshot["lost"]) == [r["name"] for r in VECTORS["loss_reasons"]]
    buckets = table["latency_buckets_seconds"]
    assert list(fencelock.LATENCY_BUCKETS) == buckets
    assert [bound for bound, _ in snapshot["acquire_latency"]["buckets"]] == buckets
    assert fencelock.METRIC_NAMES == table["exported_names"]


def test_the_prometheus_collector_exports_the_vector_names(url: str) -> None:
    from fencelock.prometheus import Collector
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    with fencelock.Client([url]) as client:
        registry.register(Collector(client))
        text = generate_latest(registry).decode()
    exported = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert exported == [
        VECTORS["metrics"]["exported_names"][f] for f in VECTORS["metrics"]["fields"]
    ]
    histogram = VECTORS["metrics"]["exported_names"]["acquire_latency"]
    les = [
        line.split('le="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith(f"{histogram}_bucket")
    ]
    assert [float(le) for le in les[:-1]] == VECTORS["metrics"]["latency_buckets_seconds"]
    assert les[-1] == "+Inf"


def test_log_levels_are_the_vectors() -> None:
    import logging

    levels = VECTORS["log_levels"]
    # The same names, most severe first, each on its logging level.
    assert [entry["name"] for entry in levels] == list(fencelock.LOG_LEVELS)
    assert dict(fencelock.LOG_LEVELS) == {
        "error": logging.ERROR,
        "warn": logging.WARNING,
        "info": logging.INFO,
        "debug": logging.DEBUG,
        "trace": fencelock.TRACE,
    }
    # The numbers the native module speaks are the vectors' values.
    assert {entry["c_value"]: fencelock.LOG_LEVELS[entry["name"]] for entry in levels} == dict(
        fencelock._logging._BY_NUMBER
    )
    try:
        for entry in levels:
            fencelock._native._set_log_level(entry["c_value"])
            assert fencelock._native._log_level() == entry["c_value"]
        for outside in (0, max(entry["c_value"] for entry in levels) + 1):
            with pytest.raises(fencelock.InvalidArgumentError):
                fencelock._native._set_log_level(outside)
    finally:
        fencelock.sync_log_level()

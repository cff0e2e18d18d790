"""Client.metrics() and AsyncClient.metrics(): the counters move exactly as a scripted
scenario says (acquire, a refused try, a wait handed the lock, release, renewal, a deleted
key, a cancelled wait); fencelock.prometheus exports them through prometheus_client."""

from __future__ import annotations

import _thread
import asyncio
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

import fencelock
import pytest
import redis
from fencelock import AsyncClient, Client, Lock
from redis_nodes import lock_key


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


async def async_wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


def only(counts: Dict[str, int], **nonzero: int) -> Dict[str, int]:
    """`counts` as it should be: every key zero but those of `nonzero`."""
    return {key: nonzero.get(key, 0) for key in counts}


def test_a_new_client_counts_nothing(url: str) -> None:
    with Client(url) as client:
        m = client.metrics()
    assert (m["acquired"], m["released"], m["held"], m["waiting"]) == (0, 0, 0, 0)
    assert set(m["failed"].values()) == {0} and set(m["lost"].values()) == {0}
    latency = m["acquire_latency"]
    assert (latency["count"], latency["sum"], latency["p50"], latency["p99"]) == (
        0,
        0.0,
        None,
        None,
    )
    assert [bound for bound, _ in latency["buckets"]] == list(fencelock.LATENCY_BUCKETS)
    assert {n for _, n in latency["buckets"]} == {0}
    # A snapshot is a copy: changing it changes nothing in the client.
    m["failed"]["timeout"] = 5
    assert client.metrics()["failed"]["timeout"] == 0


def test_counters_follow_a_scripted_scenario(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    a, b, c = Client(url), Client(url), Client(url)

    # A takes the lock: one acquisition, one lock held, one latency sample.
    held = a.acquire(resource, ttl=10, wait=0)
    m = a.metrics()
    assert (m["acquired"], m["held"], m["waiting"], m["released"]) == (1, 1, 0, 0)
    latency = m["acquire_latency"]
    assert latency["count"] == 1 and latency["sum"] > 0
    # The sample lies in a bucket, cumulatively counted, and p50 and p99 are its bound.
    first = next(bound for bound, n in latency["buckets"] if n == 1)
    assert [n for _, n in latency["buckets"]] == [
        int(bound >= first) for bound in fencelock.LATENCY_BUCKETS
    ]
    assert latency["p50"] == latency["p99"] == first
    assert latency["sum"] <= first

    # B contends: a refused try is a failure of kind not_acquired (and a latency sample).
    assert b.try_acquire(resource, ttl=10) is None
    m = b.metrics()
    assert m["failed"] == only(m["failed"], not_acquired=1)
    assert (m["acquired"], m["held"], m["acquire_latency"]["count"]) == (0, 0, 1)

    # B waits: counted as waiting until A's release hands it the lock.
    got: List[Lock] = []
    waiter = threading.Thread(target=lambda: got.append(b.acquire(resource, ttl=1, wait=10)))
    waiter.start()
    assert wait_until(lambda: b.metrics()["waiting"] == 1), "B never counted as waiting"
    assert (b.metrics()["acquired"], a.metrics()["waiting"]) == (0, 0)
    held.release()
    waiter.join(10)
    assert got, "B did not get the lock"
    lock = got[0]
    ma, mb = a.metrics(), b.metrics()
    assert (ma["released"], ma["held"], ma["acquired"]) == (1, 0, 1)
    assert (mb["acquired"], mb["waiting"], mb["held"], mb["released"]) == (1, 0, 1, 0)
    assert mb["acquire_latency"]["count"] == 2

    # B's 1 s lease renews (a late renewal would see it expired, not deleted); then its key is deleted: one loss, deleted.
    assert wait_until(lambda: b.metrics()["renewals"] >= 1, 3), "no renewal counted"
    assert lock.renewals >= 1
    r1.delete(lock_key(resource))
    assert lock.lost.wait(3) and lock.lost.reason == "deleted"
    assert wait_until(lambda: b.metrics()["held"] == 0, 3)
    m = b.metrics()
    assert m["lost"] == only(m["lost"], deleted=1)
    assert (m["renewal_failures"], m["released"]) == (0, 0)
    with pytest.raises(fencelock.NotHeldError):
        lock.release()
    assert b.metrics()["released"] == 0, "a failed release is no release"

    # C's wait, interrupted by Ctrl-C, counts as cancelled and stops waiting.
    blocker = a.acquire(resource, ttl=10, wait=0)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        c.acquire(resource, ttl=10, wait=30)
    timer.join()
    assert wait_until(lambda: c.metrics()["failed"]["cancelled"] == 1, 3)
    m = c.metrics()
    assert m["failed"] == only(m["failed"], cancelled=1)
    assert (m["waiting"], m["acquired"], m["held"], m["acquire_latency"]["count"]) == (0, 0, 0, 1)
    blocker.release()

    # Latency samples: one per acquire call, successful or not.
    ma, mb = a.metrics(), b.metrics()
    assert (ma["acquired"], ma["released"], ma["held"]) == (2, 2, 0)
    assert ma["acquire_latency"]["count"] == 2 and mb["acquire_latency"]["count"] == 2
    for client in (a, b, c):
        client.close()


def test_permits_grants_and_bad_input_count(url: str, resource: str) -> None:
    with Client(url) as client:
        permit = client.semaphore(f"{resource}:sem", 2).acquire(ttl=10, wait=0)
        reader = client.rw_lock(f"{resource}:rw").acquire_read(ttl=10, wait=0)
        with pytest.raises(fencelock.InvalidArgumentError):
            client.acquire("}bad", ttl=10, wait=0)
        m = client.metrics()
        assert (m["acquired"], m["held"], m["acquire_latency"]["count"]) == (2, 2, 3)
        assert m["failed"] == only(m["failed"], invalid_argument=1)
        permit.release()
        reader.release()
        m = client.metrics()
        assert (m["held"], m["released"]) == (0, 2)


def test_async_counters_follow_a_scripted_scenario(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    async def main() -> None:
        a, b, c = AsyncClient(url), AsyncClient(url), AsyncClient(url)
        held = await a.acquire(resource, ttl=10, wait=0)
        m = a.metrics()
        assert (m["acquired"], m["held"], m["acquire_latency"]["count"]) == (1, 1, 1)
        assert m["acquire_latency"]["p50"] is not None

        assert await b.try_acquire(resource, ttl=10) is None
        m = b.metrics()
        assert m["failed"] == only(m["failed"], not_acquired=1)

        waiting = asyncio.ensure_future(b.acquire(resource, ttl=1, wait=10))
        assert await async_wait_until(lambda: b.metrics()["waiting"] == 1)
        assert b.metrics()["acquired"] == 0
        await held.release()
        lock = await asyncio.wait_for(waiting, 10)
        ma, mb = a.metrics(), b.metrics()
        assert (ma["released"], ma["held"]) == (1, 0)
        assert (mb["acquired"], mb["waiting"], mb["held"]) == (1, 0, 1)

        assert await async_wait_until(lambda: b.metrics()["renewals"] >= 1, 3)
        r1.delete(lock_key(resource))
        assert await lock.lost.wait_async(3) and lock.lost.reason == "deleted"
        assert await async_wait_until(lambda: b.metrics()["held"] == 0, 3)
        m = b.metrics()
        assert m["lost"] == only(m["lost"], deleted=1)
        with pytest.raises(fencelock.NotHeldError):
            await lock.release()
        assert b.metrics()["released"] == 0

        # A task cancelled while its acquire waits: failed, cancelled.
        blocker = await a.acquire(resource, ttl=10, wait=0)
        task = asyncio.ensure_future(c.acquire(resource, ttl=10, wait=30))
        assert await async_wait_until(lambda: c.metrics()["waiting"] == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await async_wait_until(lambda: c.metrics()["failed"]["cancelled"] == 1, 3)
        m = c.metrics()
        assert m["failed"] == only(m["failed"], cancelled=1)
        assert (m["waiting"], m["acquired"], m["acquire_latency"]["count"]) == (0, 0, 1)
        await blocker.release()
        assert a.metrics()["acquire_latency"]["count"] == 2
        assert b.metrics()["acquire_latency"]["count"] == 2

    asyncio.run(main())


# --- fencelock.prometheus ---------------------------------------------------------


def scrape(
    registry: Any,
) -> Tuple[Dict[Tuple[str, frozenset[Tuple[str, str]]], float], Dict[str, str]]:
    """The samples of `registry` ((name, labels) -> value) and each family's type."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    text = generate_latest(registry).decode()
    types = {
        line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE ")
    }
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    return samples, types


def test_prometheus_collector_reports_the_snapshot(url: str, resource: str) -> None:
    from fencelock.prometheus import Collector
    from prometheus_client import CollectorRegistry

    client = Client(url)
    registry = CollectorRegistry()
    registry.register(Collector(client))
    lock = client.acquire(resource, ttl=10, wait=0)
    assert client.try_acquire(resource, ttl=10) is None
    samples, types = scrape(registry)
    names = fencelock.METRIC_NAMES
    assert types == {
        names["acquired"]: "counter",
        names["failed"]: "counter",
        names["lost"]: "counter",
        names["released"]: "counter",
        names["renewals"]: "counter",
        names["renewal_failures"]: "counter",
        names["held"]: "gauge",
        names["waiting"]: "gauge",
        names["acquire_latency"]: "histogram",
    }
    none: frozenset[Tuple[str, str]] = frozenset()
    assert samples[("fencelock_acquired_total", none)] == 1
    assert samples[("fencelock_failed_total", frozenset({("kind", "not_acquired")}))] == 1
    assert samples[("fencelock_failed_total", frozenset({("kind", "timeout")}))] == 0
    assert samples[("fencelock_lost_total", frozenset({("reason", "deleted")}))] == 0
    assert samples[("fencelock_held", none)] == 1
    assert samples[("fencelock_waiting", none)] == 0
    assert samples[("fencelock_released_total", none)] == 0
    snapshot = client.metrics()
    kinds = {dict(labels)["kind"] for name, labels in samples if name == "fencelock_failed_total"}
    assert kinds == set(snapshot["failed"])
    latency = snapshot["acquire_latency"]
    assert samples[("fencelock_acquire_latency_seconds_count", none)] == 2
    assert samples[("fencelock_acquire_latency_seconds_sum", none)] == pytest.approx(latency["sum"])
    assert samples[("fencelock_acquire_latency_seconds_bucket", frozenset({("le", "+Inf")}))] == 2
    for bound, below in latency["buckets"]:
        le = frozenset({("le", repr(float(bound)))})
        assert samples[("fencelock_acquire_latency_seconds_bucket", le)] == below

    # Each scrape reads a new snapshot.
    lock.release()
    samples, _ = scrape(registry)
    assert samples[("fencelock_released_total", none)] == 1
    assert samples[("fencelock_held", none)] == 0
    client.close()


def test_prometheus_collector_of_several_clients(url: str, resource: str) -> None:
    from fencelock.prometheus import Collector
    from prometheus_client import CollectorRegistry

    sync, aio = Client(url), AsyncClient(url)
    collector = Collector(sync, labels={"pool": "sync"})
    collector.add(aio, labels={"pool": "async"})
    registry = CollectorRegistry()
    registry.register(collector)
    # A second collector of the same names in the same registry is refused.
    with pytest.raises(ValueError):
        registry.register(Collector(Client(url)))
    sync.acquire(resource, ttl=10, wait=0).release()
    samples, _ = scrape(registry)
    assert samples[("fencelock_acquired_total", frozenset({("pool", "sync")}))] == 1
    assert samples[("fencelock_acquired_total", frozenset({("pool", "async")}))] == 0
    assert samples[("fencelock_released_total", frozenset({("pool", "sync")}))] == 1
    assert (
        samples[("fencelock_failed_total", frozenset({("pool", "async"), ("kind", "cancelled")}))]
        == 0
    )

    with pytest.raises(ValueError, match="labels"):
        collector.add(Client(url), labels={"other": "x"})
    with pytest.raises(ValueError, match="already"):
        collector.add(Client(url), labels={"pool": "sync"})
    with pytest.raises(ValueError, match="fencelock's own"):
        Collector(sync, labels={"kind": "x"})
    with pytest.raises(TypeError):
        Collector(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Collector(sync, labels={"pool": 1})  # type: ignore[dict-item]


def run_python(code: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_importing_fencelock_needs_no_prometheus_client() -> None:
    done = run_python("import sys, fencelock; print('prometheus_client' in sys.modules)")
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


def test_fencelock_prometheus_without_prometheus_client_says_what_to_install() -> None:
    done = run_python(
        "import sys\n"
        "sys.modules['prometheus_client'] = None\n"
        "import fencelock\n"
        "fencelock.Client\n"
        "import fencelock.prometheus\n"
    )
    assert done.returncode != 0
    assert "ImportError" in done.stderr and "fencelock[prometheus]" in done.stderr, done.stderr

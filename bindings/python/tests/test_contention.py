"""Contention across threads and processes with an exact counter; the GIL
is released while waiting."""

from __future__ import annotations

import multiprocessing
import threading
from typing import List, Tuple

import pytest
import redis
from fencelock import Client


def _increment_under_lock(
    client: Client, r: "redis.Redis[str]", resource: str, counter: str, rounds: int
) -> None:
    for _ in range(rounds):
        with client.lock(resource, ttl=5, wait=60):
            # A read-modify-write that loses updates without mutual exclusion.
            value = int(r.get(counter) or 0)
            r.set(counter, value + 1)


@pytest.mark.parametrize("n_nodes", [1, 5])
def test_threads_exact_counter(n_nodes: int, url: str, urls5: List[str], resource: str) -> None:
    urls = [url] if n_nodes == 1 else urls5
    client = Client(urls, retry=(0.002, 0.05))
    r = redis.Redis.from_url(urls[0], decode_responses=True)
    counter = f"counter:{resource}"
    r.set(counter, 0)
    threads_n, rounds = 8, 10
    errors: List[BaseException] = []

    def work() -> None:
        try:
            _increment_under_lock(client, r, resource, counter, rounds)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert int(r.get(counter) or 0) == threads_n * rounds


def _process_worker(urls: List[str], resource: str, counter: str, rounds: int) -> None:
    client = Client(urls, retry=(0.002, 0.05))
    r = redis.Redis.from_url(urls[0], decode_responses=True)
    _increment_under_lock(client, r, resource, counter, rounds)


@pytest.mark.parametrize("n_nodes", [1, 5])
def test_processes_exact_counter(n_nodes: int, url: str, urls5: List[str], resource: str) -> None:
    urls = [url] if n_nodes == 1 else urls5
    r = redis.Redis.from_url(urls[0], decode_responses=True)
    counter = f"counter:{resource}"
    r.set(counter, 0)
    procs_n, rounds = 4, 10
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_process_worker, args=(urls, resource, counter, rounds))
        for _ in range(procs_n)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert int(r.get(counter) or 0) == procs_n * rounds


def test_gil_released_while_waiting(url: str, resource: str) -> None:
    """16 threads wait on a held lock; a CPU-bound Python thread still runs
    to completion before the lock is released. Were the GIL held while
    waiting, the CPU thread could not finish until the waiters gave up."""
    client = Client(url)
    holder = client.acquire(resource, ttl=30)
    waiting = threading.Barrier(17)
    outcomes: List[str] = []

    def waiter() -> None:
        waiting.wait()
        lock = client.acquire(resource, ttl=5, wait=60)
        outcomes.append("acquired")
        lock.release()

    waiters = [threading.Thread(target=waiter) for _ in range(16)]
    for t in waiters:
        t.start()
    waiting.wait()

    spun = 0

    def cpu_bound() -> None:
        nonlocal spun
        for i in range(3_000_000):
            spun += 1

    cpu = threading.Thread(target=cpu_bound)
    cpu.start()
    cpu.join(timeout=60)
    assert not cpu.is_alive(), "the CPU-bound thread was starved"
    assert spun == 3_000_000
    assert outcomes == [], "nobody may acquire while the holder holds"
    holder.release()
    for t in waiters:
        t.join(timeout=60)
    assert outcomes == ["acquired"] * 16


def test_waits_overlap_in_parallel(url: str, resource: str) -> None:
    """32 threads block inside acquire at the same time: each records when
    its call started and ended; with the GIL released they all wait together."""
    client = Client(url, retry=(0.002, 0.02))
    holder = client.acquire(resource, ttl=30)
    inside = 0
    peak = 0
    guard = threading.Lock()
    all_in = threading.Event()
    spans: List[Tuple[int, int]] = []

    def worker() -> None:
        nonlocal inside, peak
        with guard:
            inside += 1
            peak = max(peak, inside)
            if inside == 32:
                all_in.set()
        lock = client.acquire(resource, ttl=5, wait=60)
        with guard:
            inside -= 1
        spans.append((lock.fencing_token, 0))
        lock.release()

    threads = [threading.Thread(target=worker) for _ in range(32)]
    for t in threads:
        t.start()
    assert all_in.wait(60)
    # All 32 are inside acquire (none can succeed while the holder holds).
    assert peak == 32
    holder.release()
    for t in threads:
        t.join(timeout=60)
    tokens = sorted(t for t, _ in spans)
    assert len(tokens) == 32 and len(set(tokens)) == 32
    assert tokens[0] > holder.fencing_token

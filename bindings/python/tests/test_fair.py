"""Fair (FIFO) waiting from Python (docs/protocol.md §4.9): ``fair=True``
reaches the core, waiters in other processes are served in arrival order,
and a waiter killed or stopped while first in line never blocks the queue."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from typing import Callable, Iterator

import pytest
import redis
from fencelock import AsyncClient, Client, InvalidArgumentError, NotAcquiredError
from redis_nodes import lock_key

# A waiter's lease on its place in a queue (docs/protocol.md §4.9).
WAITER_LEASE = 1.0


@pytest.fixture
def r(url: str) -> Iterator["redis.Redis[str]"]:
    conn = redis.Redis.from_url(url, decode_responses=True)
    yield conn
    conn.close()


def _queue(resource: str) -> str:
    return f"{lock_key(resource)}:queue"


def _seed_live_waiter(r: "redis.Redis[str]", resource: str) -> None:
    """Puts a waiter with a long lease first in line, as a live waiter
    between two of its attempts looks."""
    waiter = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1"
    r.zadd(_queue(resource), {waiter: 1})
    r.zadd(f"{lock_key(resource)}:leases", {waiter: 99_999_999_999_999})


def _wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.005)
    return condition()


def test_fair_newcomer_does_not_pass_a_live_waiter(
    url: str, r: "redis.Redis[str]", resource: str
) -> None:
    _seed_live_waiter(r, resource)
    client = Client([url])
    assert client.try_acquire(resource, ttl=5, fair=True) is None
    assert r.get(lock_key(resource)) is None
    # The same client without `fair` takes a lock that is free when it asks.
    lock = client.try_acquire(resource, ttl=5, fair=False)
    assert lock is not None
    lock.release()


def test_fair_lock_context_and_async(url: str, r: "redis.Redis[str]", resource: str) -> None:
    _seed_live_waiter(r, resource)
    client = Client([url])
    with pytest.raises(NotAcquiredError):
        with client.lock(resource, ttl=5, wait=0, fair=True):
            pass

    async def attempt() -> bool:
        async_client = await AsyncClient.connect([url])
        return await async_client.try_acquire(resource, ttl=5, fair=True) is None

    assert asyncio.run(attempt())


def test_fair_must_be_a_bool(url: str, resource: str) -> None:
    client = Client([url])
    with pytest.raises(TypeError):
        client.try_acquire(resource, ttl=5, fair="yes")  # type: ignore[call-overload]
    with pytest.raises(InvalidArgumentError):
        client.try_acquire(resource, ttl=0, fair=True)


def _fair_waiter(url: str, resource: str, log: str) -> None:
    """A process that waits for the lock in fair mode, logs its pid once it
    holds it, and releases it."""
    client = Client([url])
    with client.lock(resource, ttl=5, wait=30, fair=True):
        redis.Redis.from_url(url).rpush(log, os.getpid())
        time.sleep(0.002)


def _start_waiter(
    url: str, resource: str, log: str, r: "redis.Redis[str]"
) -> multiprocessing.Process:
    """Starts a waiter process and returns once it is in the queue, so the
    processes arrive in the order they are started."""
    queued = r.zcard(_queue(resource))
    process = multiprocessing.get_context("spawn").Process(
        target=_fair_waiter, args=(url, resource, log)
    )
    process.start()
    assert _wait_until(lambda: r.zcard(_queue(resource)) == queued + 1, 20), "waiter never queued"
    return process


def test_fair_waiters_in_other_processes_are_served_in_arrival_order(
    url: str, r: "redis.Redis[str]", resource: str
) -> None:
    holder = Client([url]).acquire(resource, ttl=10, wait=0)
    log = f"order:{resource}"
    processes = [_start_waiter(url, resource, log, r) for _ in range(4)]
    holder.release()
    for process in processes:
        process.join(30)
        assert process.exitcode == 0
    assert [int(pid) for pid in r.lrange(log, 0, -1)] == [p.pid for p in processes]


@pytest.mark.parametrize("failure", ["kill", "stop"])
def test_a_fair_waiter_killed_or_stopped_first_in_line_does_not_block_the_queue(
    failure: str, url: str, r: "redis.Redis[str]", resource: str
) -> None:
    holder = Client([url]).acquire(resource, ttl=10, wait=0)
    log = f"order:{resource}"
    first = _start_waiter(url, resource, log, r)
    second = _start_waiter(url, resource, log, r)
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL if failure == "kill" else signal.SIGSTOP)
    try:
        released = time.monotonic()
        holder.release()
        second.join(20)
        waited = time.monotonic() - released
        print(f"{failure}: second waiter took the lock {waited:.3f} s after the release")
        assert second.exitcode == 0
        assert [int(pid) for pid in r.lrange(log, 0, -1)] == [second.pid]
        # At most the dead waiter's lease on its place, the reservation a
        # stopped one was handed (twice the 0.1 s node timeout) and a pause;
        # a stalled queue would hold the second waiter for its whole wait.
        assert waited < WAITER_LEASE + 1.5, f"the queue stalled for {waited:.2f} s"
    finally:
        if failure == "stop":
            os.kill(first.pid, signal.SIGCONT)
        first.join(30)
    if failure == "stop":
        # Resumed, it finds it lost its place, queues again and gets the lock.
        assert first.exitcode == 0
        assert [int(pid) for pid in r.lrange(log, 0, -1)] == [second.pid, first.pid]
    assert _wait_until(lambda: r.zcard(_queue(resource)) == 0)

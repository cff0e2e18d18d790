"""Redlock over several nodes: quorum, node failures, per-node outcomes."""

from __future__ import annotations

import time
from typing import Any, List

import fencelock
import pytest
import redis
from fencelock import Client
from redis_nodes import lock_key


def test_five_nodes_lock_on_majority(urls5: List[str], resource: str) -> None:
    # Generous node timeout, so that no node's DEL comes too late on a busy
    # machine. A release returns once a majority answered; settle() waits
    # for the rest, after which the key is gone on all five.
    client = Client(urls5, node_timeout=5)
    assert client.quorum == 3
    with client.lock(resource, ttl=5):
        held = sum(redis.Redis.from_url(u).exists(lock_key(resource)) for u in urls5)
        assert held >= 3
        assert client.try_acquire(resource, ttl=5) is None
    assert fencelock.settle(10)
    for u in urls5:
        assert redis.Redis.from_url(u).exists(lock_key(resource)) == 0


def test_three_nodes_one_killed_still_locks(nodes3: Any, resource: str) -> None:
    client = Client(nodes3.urls, node_timeout=0.2)
    first = client.acquire(resource, ttl=5)
    first.release()
    nodes3.kill(2)
    lock = client.acquire(resource, ttl=5, wait=2)
    assert lock.fencing_token > first.fencing_token
    assert client.try_acquire(resource, ttl=5) is None
    lock.release()


def test_two_of_three_killed_is_unavailable_with_node_outcomes(nodes3: Any, resource: str) -> None:
    client = Client(nodes3.urls, node_timeout=0.2)
    nodes3.kill(0)
    nodes3.kill(1)
    with pytest.raises(fencelock.UnavailableError) as err:
        client.acquire(resource, ttl=5, wait=0)
    e = err.value
    assert e.kind == "unavailable" and e.code == 3
    assert len(e.nodes) == 3
    by_node = {n.node: n for n in e.nodes}
    # The live node granted, or had not answered when the quorum was already impossible.
    assert by_node[nodes3.urls[2]].outcome in ("ok", "pending")
    for u in nodes3.urls[:2]:
        assert by_node[u].outcome in ("failed", "timed_out"), e.nodes
        assert u in str(e)
    # The partial grant on the live node is undone (a late grant is released too).
    live = redis.Redis.from_url(nodes3.urls[2])
    for _ in range(100):
        if live.exists(lock_key(resource)) == 0:
            break
        time.sleep(0.05)
    assert live.exists(lock_key(resource)) == 0
    # With waiting, the same failure becomes a timeout that keeps the node detail.
    with pytest.raises(fencelock.LockTimeoutError) as waited:
        client.acquire(resource, ttl=5, wait=0.3)
    assert len(waited.value.nodes) == 3


def test_lost_when_majority_deleted(urls5: List[str], resource: str) -> None:
    client = Client(urls5, node_timeout=5)
    lock = client.acquire(resource, ttl=0.3)
    # Acquire returns at a quorum: let the other grants land first, or a late
    # one could re-create a key after it was deleted and keep a majority. (A
    # grant may also never come: a request not yet sent when the quorum
    # decided is dropped. Then the deletes below leave a minority anyway.)
    nodes = [redis.Redis.from_url(u) for u in urls5]
    deadline = time.monotonic() + 2
    while not all(n.exists(lock_key(resource)) for n in nodes) and time.monotonic() < deadline:
        time.sleep(0.01)
    for n in nodes[:3]:
        n.delete(lock_key(resource))
    assert lock.lost.wait(timeout=10)
    assert lock.lost.reason == "deleted"


def test_redlock_fencing_tokens_increase_across_clients(urls5: List[str], resource: str) -> None:
    a, b = Client(urls5), Client(list(reversed(urls5)))
    tokens = []
    for i in range(10):
        with (a if i % 2 else b).lock(resource, ttl=5) as lock:
            tokens.append(lock.fencing_token)
    assert tokens == sorted(set(tokens))

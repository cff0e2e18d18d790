"""A lock whose grant arrives after its ttl is refused (redis-py's is not)."""

from __future__ import annotations

import time
from typing import Iterator
from urllib.parse import urlparse

import fencelock
import pytest
import redis
from delay_proxy import DelayProxy
from fencelock import Client
from redis_nodes import lock_key

DELAY = 0.3
TTL = 0.2


@pytest.fixture
def proxy(url: str) -> Iterator[DelayProxy]:
    port = urlparse(url).port
    assert port is not None
    p = DelayProxy(port, DELAY)
    yield p
    p.close()


def test_grant_arriving_after_ttl_is_refused(
    proxy: DelayProxy, resource: str, r1: "redis.Redis[str]"
) -> None:
    # The per-node timeout is longer than the delay: the reply does arrive,
    # but only after the lock has already expired on Redis.
    client = Client(proxy.url, node_timeout=2, connect_timeout=5)
    with pytest.raises(fencelock.FenceLockError) as err:
        client.acquire(resource, ttl=TTL, wait=0)
    assert resource in str(err.value), err.value
    assert not isinstance(err.value, fencelock.NotAcquiredError), "nobody else holds it"
    # Nothing is left behind beyond the ttl.
    time.sleep(TTL + 0.1)
    assert r1.exists(lock_key(resource)) == 0


def test_redis_py_lock_hands_back_an_expired_lock(
    proxy: DelayProxy, resource: str, r1: "redis.Redis[str]"
) -> None:
    """For contrast: redis-py's Lock reports success for a lock that had
    expired on Redis before the reply came back."""
    slow = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=5)
    slow.ping()
    lock = slow.lock(f"redispy:{resource}", timeout=TTL)
    assert lock.acquire(blocking=False) is True
    # ...yet the key is already gone: another client could hold it now.
    assert r1.exists(f"redispy:{resource}") == 0
    slow.close()

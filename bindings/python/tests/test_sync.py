"""The sync API against a real redis-server: lifecycle, context managers,
fencing, the lost signal."""

from __future__ import annotations

import threading
import time

import fencelock
import pytest
import redis
from fencelock import Client
from redis_nodes import lock_key


def test_acquire_release_lifecycle(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    client = Client(url)
    lock = client.acquire(resource, ttl=5, wait=1)
    assert isinstance(lock, fencelock.Lock)
    assert lock.resource == resource
    assert lock.is_held()
    assert lock.status == "held"
    assert 0 < lock.remaining <= 5
    assert isinstance(lock.fencing_token, int) and lock.fencing_token >= 1
    assert not lock.lost.is_set() and lock.lost.reason is None
    assert r1.exists(lock_key(resource)) == 1
    assert 0 < r1.pttl(lock_key(resource)) <= 5000

    lock.release()
    assert r1.exists(lock_key(resource)) == 0
    assert not lock.is_held()
    assert lock.status == "released"
    assert lock.remaining == 0.0
    assert not lock.lost.is_set(), "a clean release is not a loss"
    with pytest.raises(fencelock.NotHeldError) as err:
        lock.release()
    assert resource in str(err.value)
    assert err.value.resource == resource


def test_try_acquire_returns_none_when_held(url: str, resource: str) -> None:
    # Single tries that check the node's answer: a generous node timeout, so a
    # slow answer is not reported as "timed out" / unavailable instead of held.
    client = Client(url, node_timeout=5)
    holder = client.acquire(resource, ttl=5)
    assert client.try_acquire(resource, ttl=5) is None
    with pytest.raises(fencelock.NotAcquiredError) as err:
        client.acquire(resource, ttl=5, wait=0)
    assert err.value.kind == "not_acquired"
    assert [n.outcome for n in err.value.nodes] == ["held_by_other"]
    assert err.value.nodes[0].node == url
    holder.release()
    again = client.try_acquire(resource, ttl=5)
    assert again is not None and again.fencing_token > holder.fencing_token
    again.release()


def test_wait_times_out_with_lock_timeout(url: str, resource: str) -> None:
    client = Client(url)
    holder = client.acquire(resource, ttl=5)
    with pytest.raises(fencelock.LockTimeoutError) as err:
        client.acquire(resource, ttl=5, wait=0.2)
    assert resource in str(err.value) and url in str(err.value)
    assert isinstance(err.value, fencelock.FenceLockError)
    holder.release()


def test_wait_succeeds_when_released_meanwhile(url: str, resource: str) -> None:
    client = Client(url)
    holder = client.acquire(resource, ttl=5)
    timer = threading.Timer(0.2, holder.release)
    timer.start()
    lock = client.acquire(resource, ttl=5, wait=10)
    timer.join()
    assert lock.fencing_token > holder.fencing_token
    lock.release()


def test_lock_context_manager_releases(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    client = Client(url)
    with client.lock(resource, ttl=5, wait=1) as lock:
        assert isinstance(lock, fencelock.Lock)
        assert r1.exists(lock_key(resource)) == 1
    assert r1.exists(lock_key(resource)) == 0
    assert lock.status == "released"


def test_context_manager_releases_on_exception(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    client = Client(url)
    with pytest.raises(RuntimeError, match="boom"):
        with client.lock(resource, ttl=5) as lock:
            raise RuntimeError("boom")
    assert r1.exists(lock_key(resource)) == 0
    assert lock.status == "released"
    # The Lock itself is a context manager too.
    with pytest.raises(KeyError):
        with client.acquire(resource, ttl=5) as lock2:
            raise KeyError("x")
    assert lock2.status == "released"
    assert r1.exists(lock_key(resource)) == 0


def test_context_manager_raises_when_lock_was_lost(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    client = Client(url)
    with pytest.raises(fencelock.NotHeldError):
        with client.lock(resource, ttl=0.3) as lock:
            r1.delete(lock_key(resource))
            assert lock.lost.wait(timeout=10)


def test_fencing_tokens_strictly_increase(url: str, resource: str) -> None:
    client = Client(url)
    tokens = []
    for _ in range(20):
        with client.lock(resource, ttl=5) as lock:
            tokens.append(lock.fencing_token)
    assert tokens == sorted(set(tokens)), tokens
    assert len(tokens) == 20


def test_fenced_set_refuses_stale_token(url: str, resource: str) -> None:
    client = Client(url)
    key = f"data:{resource}"
    first = client.acquire(resource, ttl=5)
    old_token = first.fencing_token
    first.release()
    second = client.acquire(resource, ttl=5)
    client.fenced_set(key, "new", second.fence)
    with pytest.raises(fencelock.StaleTokenError) as err:
        client.fenced_set(key, "old", old_token)
    assert key in str(err.value)
    assert client.fenced_get(key) == ("new", second.fencing_token)
    # A bare equal token cannot prove it is the same grant: refused.
    with pytest.raises(fencelock.StaleTokenError):
        client.fenced_set(key, "bare", second.fencing_token)
    # The same grant, by its fence (or the fence's text), may write again.
    client.fenced_set(key, "newer", second.fence)
    client.fenced_set(key, "newest", str(second.fence))
    assert client.fenced_get(key) == ("newest", second.fencing_token)
    # Another grant with the same token (after a lost counter) may not.
    other = fencelock.Fence(second.fencing_token, second.fence.holder % (2**63 - 1) + 1)
    with pytest.raises(fencelock.StaleTokenError):
        client.fenced_set(key, "other", other)
    assert client.fenced_get(f"missing:{resource}") is None
    second.release()


def test_fence_values() -> None:
    fence = fencelock.Fence(42, 7)
    assert (fence.token, fence.holder) == (42, 7)
    assert str(fence) == "42:7" and fencelock.Fence.parse("42:7") == fence
    assert fencelock.Fence.parse("42") == fencelock.Fence(42) and fencelock.Fence(42).holder == 0
    assert hash(fence) == hash(fencelock.Fence(42, 7))
    for bad in ["", "x", "1:", "1:2:3", "1:9223372036854775808"]:
        with pytest.raises(fencelock.InvalidArgumentError):
            fencelock.Fence.parse(bad)
    with pytest.raises(fencelock.InvalidArgumentError):
        fencelock.Fence(1, 2**63)
    with pytest.raises(TypeError):
        fencelock.Fence("1")  # type: ignore[arg-type]


def test_lost_signal_after_key_deleted(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    client = Client(url)
    calls: list[tuple[str, str]] = []
    called = threading.Event()

    def on_lost(res: str, reason: str) -> None:
        calls.append((res, reason))
        called.set()

    lock = client.acquire(resource, ttl=0.3, on_lost=on_lost)
    assert lock.lost.wait(timeout=0.01) is False
    assert r1.delete(lock_key(resource)) == 1
    assert lock.lost.wait(timeout=10) is True
    assert lock.lost.is_set()
    assert lock.lost.reason == "deleted"
    assert lock.status == "lost"
    assert not lock.is_held()
    assert called.wait(10)
    assert calls == [(resource, "deleted")]
    with pytest.raises(fencelock.LockLostError):
        lock.extend(1)
    with pytest.raises(fencelock.NotHeldError):
        lock.release()


def test_lost_signal_when_taken_over(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    client = Client(url)
    lock = client.acquire(resource, ttl=0.3)
    r1.set(lock_key(resource), "someone-else", px=5000)
    assert lock.lost.wait(timeout=10)
    assert lock.lost.reason == "taken_over"


def test_extend_and_auto_renew(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    client = Client(url)
    lock = client.acquire(resource, ttl=0.2, auto_renew=False)
    lock.extend(5)
    assert lock.remaining > 1
    assert r1.pttl(lock_key(resource)) > 1000
    lock.release()
    # With auto-renew, a short ttl keeps being renewed while held. (0.3 s, not
    # less: one renewal that needs the whole 100 ms node timeout must still
    # land inside the validity on a busy machine.)
    renewed = client.acquire(resource, ttl=0.3)
    assert not renewed.lost.wait(timeout=1.2), "renewals keep the lock"
    assert renewed.renewals >= 1
    assert renewed.is_held()
    renewed.release()


def test_no_auto_renew_expires_and_signals(url: str, resource: str) -> None:
    client = Client(url)
    lock = client.acquire(resource, ttl=0.1, auto_renew=False)
    assert lock.lost.wait(timeout=10)
    assert lock.lost.reason == "expired"
    assert not lock.is_held()


def test_close_refuses_new_operations(url: str, resource: str) -> None:
    client = Client(url)
    lock = client.acquire(resource, ttl=5)
    client.close()
    with pytest.raises(fencelock.ClosedError):
        client.acquire(resource + ":2", ttl=5)
    lock.release()  # held locks can still be released
    with Client(url) as c2:
        with c2.lock(resource, ttl=5):
            pass
    with pytest.raises(fencelock.ClosedError):
        c2.try_acquire(resource, ttl=5)


def test_inspect_and_properties(url: str, resource: str) -> None:
    client = Client([url], key_prefix="app:", node_timeout=0.5, retry=(0.005, 0.05))
    assert client.nodes == [url]
    assert client.quorum == 1
    assert url in repr(client)
    with client.lock(resource, ttl=5) as lock:
        (state,) = client.inspect(resource)
        assert state["node"] == url and state["held"] is True
        assert 0 < state["ttl"] <= 5
        assert state["fencing_counter"] == lock.fencing_token
        assert state["waiters"] == 0
        assert state["error"] is None
        assert resource in repr(lock)
        waiter = Client([url], key_prefix="app:")
        got: list = []
        thread = threading.Thread(
            target=lambda: got.append(waiter.acquire(resource, ttl=5, wait=10))
        )
        thread.start()
        deadline = time.monotonic() + 5
        while client.inspect(resource)[0]["waiters"] != 1:
            assert time.monotonic() < deadline, client.inspect(resource)
            time.sleep(0.02)
    thread.join(10)
    got[0].release()


def test_key_prefix_is_used(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    client = Client(url, key_prefix="shop:")
    with client.lock(resource, ttl=5):
        assert r1.exists(lock_key(resource, "shop:")) == 1
        assert r1.exists(lock_key(resource)) == 0


def test_timedelta_and_int_seconds(url: str, resource: str) -> None:
    import datetime

    client = Client(url, default_ttl=datetime.timedelta(seconds=3), default_wait=0)
    lock = client.acquire(resource)
    assert 2 < lock.remaining <= 3
    lock.extend(datetime.timedelta(seconds=4))
    assert lock.remaining > 3
    lock.release()

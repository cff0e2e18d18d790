"""PostgreSQL as a node (docs/postgres-store.md), sync and asyncio: the same
locks, tokens, waits, fenced writes and lost signal over a real PostgreSQL
server from ``redis-nodes --postgres``. Skipped, saying why, when it cannot
start one (PostgreSQL not installed)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Awaitable, Callable, Iterator, List, Tuple
from urllib.parse import urlsplit

import fencelock
import pytest
from fencelock import AsyncClient, Client
from redis_nodes import PostgresMissing, RedisNodes, lock_key


@pytest.fixture(scope="module")
def pg(request: pytest.FixtureRequest) -> Iterator[RedisNodes]:
    """One PostgreSQL server for this file's tests."""
    try:
        server = RedisNodes(postgres=True)
    except PostgresMissing as err:
        reason = f"no PostgreSQL server: {err}"
        # Said on the terminal too: -q does not list the reasons of skips.
        plugins = request.config.pluginmanager
        reporter, capture = (
            plugins.getplugin("terminalreporter"),
            plugins.getplugin("capturemanager"),
        )
        if reporter is not None and capture is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line(f"\nSKIPPED {request.node.name}: {reason}", yellow=True)
        pytest.skip(reason)
    with server:
        yield server


@pytest.fixture
def pg_url(pg: RedisNodes) -> str:
    return pg.urls[0]


def quoted(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def delete_lease_row(pg: RedisNodes, resource: str) -> None:
    """Deletes the lock's lease row behind its holder's back."""
    key = lock_key(resource)
    assert pg.sql(f"DELETE FROM fencelock.keys WHERE key = {quoted(key)} RETURNING key") == key


def lease_ms(pg: RedisNodes, resource: str) -> int:
    """Milliseconds left on the lease row's expiry, by the server's clock."""
    return int(
        pg.sql(
            "SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::int "
            f"FROM fencelock.keys WHERE key = {quoted(lock_key(resource))}"
        )
    )


def lease_rows(pg: RedisNodes, resource: str) -> int:
    return int(
        pg.sql(f"SELECT count(*) FROM fencelock.keys WHERE key = {quoted(lock_key(resource))}")
    )


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(main())  # type: ignore[arg-type]


# -- sync ---------------------------------------------------------------------


def test_postgres_acquire_refuse_extend_release(pg: RedisNodes, pg_url: str, resource: str) -> None:
    holder, other = Client(pg_url, node_timeout=5), Client(pg_url, node_timeout=5)
    lock = holder.acquire(resource, ttl=5)
    assert lock.is_held() and lock.fencing_token >= 1
    assert lease_rows(pg, resource) == 1
    assert other.try_acquire(resource, ttl=5) is None
    with pytest.raises(fencelock.NotAcquiredError) as err:
        other.acquire(resource, ttl=5, wait=0)
    assert [n.outcome for n in err.value.nodes] == ["held_by_other"]
    lock.extend(8)
    assert 5000 < lease_ms(pg, resource) <= 8000, "the lease row's expiry follows extend"
    assert 5 < lock.remaining <= 8
    lock.release()
    assert lock.status == "released"
    assert lease_rows(pg, resource) == 0
    again = other.acquire(resource, ttl=5, wait=0)
    assert again.fencing_token > lock.fencing_token
    again.release()


def test_postgres_waiter_is_served_after_release(pg_url: str, resource: str) -> None:
    holder, waiter = Client(pg_url, node_timeout=5), Client(pg_url, node_timeout=5)
    lock = holder.acquire(resource, ttl=10)
    got: List[Any] = []
    thread = threading.Thread(
        target=lambda: got.append(waiter.acquire(resource, ttl=5, wait=8)), daemon=True
    )
    thread.start()
    thread.join(timeout=0.5)
    assert thread.is_alive() and not got, "the waiter waits while the lock is held"
    released = time.monotonic()
    lock.release()
    thread.join(timeout=8)
    assert got, "the waiter was not served after the release"
    assert time.monotonic() - released < 5
    assert got[0].fencing_token > lock.fencing_token
    got[0].release()


def test_postgres_fenced_set_refuses_stale_token(pg_url: str, resource: str) -> None:
    client = Client(pg_url)
    key = f"data:{resource}"
    first = client.acquire(resource, ttl=5)
    old = first.fence
    first.release()
    second = client.acquire(resource, ttl=5)
    client.fenced_set(key, "new", second.fence)
    with pytest.raises(fencelock.StaleTokenError) as err:
        client.fenced_set(key, "old", old)
    assert err.value.kind == "stale_token"
    assert client.fenced_get(key) == ("new", second.fencing_token)
    client.fenced_set(key, "newer", second.fence)
    assert client.fenced_get(key) == ("newer", second.fencing_token)
    assert client.fenced_get(f"missing:{resource}") is None
    second.release()


def test_postgres_deleted_lease_row_signals_lost(
    pg: RedisNodes, pg_url: str, resource: str
) -> None:
    client = Client(pg_url)
    calls: List[Tuple[str, str]] = []
    called = threading.Event()

    def on_lost(res: str, reason: str) -> None:
        calls.append((res, reason))
        called.set()

    lock = client.acquire(resource, ttl=0.6, on_lost=on_lost)
    assert lock.lost.wait(timeout=0.01) is False
    delete_lease_row(pg, resource)
    assert lock.lost.wait(timeout=5) is True
    assert lock.lost.reason == "deleted"
    assert lock.status == "lost" and not lock.is_held()
    assert called.wait(5)
    assert calls == [(resource, "deleted")]
    with pytest.raises(fencelock.LockLostError):
        lock.extend(1)


def test_postgres_beside_redis_is_a_config_error_and_the_password_never_shows(
    pg_url: str, resource: str
) -> None:
    password = urlsplit(pg_url).password
    assert password, pg_url
    with pytest.raises(fencelock.ConfigError) as err:
        Client([pg_url, "redis://127.0.0.1:1"])
    assert err.value.kind == "config"
    assert "PostgreSQL" in str(err.value), str(err.value)
    for shown in (str(err.value), repr(err.value), *map(str, err.value.args)):
        assert password not in shown, shown
    # A working client does not show it either.
    client = Client(pg_url)
    for shown in (repr(client), str(client), *client.nodes):
        assert password not in shown, shown
    assert "127.0.0.1" in repr(client)
    lock = client.acquire(resource, ttl=5)
    assert password not in repr(lock)
    with pytest.raises(fencelock.NotAcquiredError) as refused:
        client.acquire(resource, ttl=5, wait=0)
    for shown in (str(refused.value), repr(refused.value), refused.value.nodes[0].node):
        assert password not in shown, shown
    lock.release()


# -- asyncio ------------------------------------------------------------------


def test_postgres_async_acquire_refuse_extend_release(
    pg: RedisNodes, pg_url: str, resource: str
) -> None:
    async def main() -> None:
        holder = AsyncClient(pg_url, node_timeout=5)
        other = await AsyncClient.connect(pg_url, node_timeout=5)
        lock = await holder.acquire(resource, ttl=5)
        assert lock.is_held() and lease_rows(pg, resource) == 1
        assert await other.try_acquire(resource, ttl=5) is None
        with pytest.raises(fencelock.NotAcquiredError):
            await other.acquire(resource, ttl=5, wait=0)
        await lock.extend(8)
        assert 5000 < lease_ms(pg, resource) <= 8000
        await lock.release()
        assert lease_rows(pg, resource) == 0
        again = await other.acquire(resource, ttl=5, wait=0)
        assert again.fencing_token > lock.fencing_token
        await again.release()

    run(main)


def test_postgres_async_waiter_is_served_after_release(pg_url: str, resource: str) -> None:
    async def main() -> None:
        holder, waiter = AsyncClient(pg_url, node_timeout=5), AsyncClient(pg_url, node_timeout=5)
        lock = await holder.acquire(resource, ttl=10)
        waiting = asyncio.ensure_future(waiter.acquire(resource, ttl=5, wait=8))
        await asyncio.sleep(0.5)
        assert not waiting.done(), "the waiter waits while the lock is held"
        await lock.release()
        next_lock = await asyncio.wait_for(waiting, timeout=8)
        assert next_lock.fencing_token > lock.fencing_token
        await next_lock.release()

    run(main)


def test_postgres_async_fenced_set_refuses_stale_token(pg_url: str, resource: str) -> None:
    async def main() -> None:
        client = AsyncClient(pg_url)
        key = f"data:{resource}"
        async with client.lock(resource, ttl=5) as first:
            pass
        async with client.lock(resource, ttl=5) as second:
            await client.fenced_set(key, "b", second.fence)
            with pytest.raises(fencelock.StaleTokenError) as err:
                await client.fenced_set(key, "late", first.fence)
            assert err.value.kind == "stale_token"
        assert await client.fenced_get(key) == ("b", second.fencing_token)

    run(main)


def test_postgres_async_deleted_lease_row_signals_lost(
    pg: RedisNodes, pg_url: str, resource: str
) -> None:
    calls: List[str] = []

    async def main() -> None:
        client = AsyncClient(pg_url)
        lock = await client.acquire(resource, ttl=0.6, on_lost=lambda res, why: calls.append(why))
        assert await lock.lost.wait_async(timeout=0.01) is False
        delete_lease_row(pg, resource)
        assert await lock.lost.wait_async(timeout=5) is True
        assert lock.lost.reason == "deleted" and lock.status == "lost"
        with pytest.raises(fencelock.LockLostError):
            await lock.extend(1)
        for _ in range(100):
            if calls:
                break
            await asyncio.sleep(0.05)
        assert calls == ["deleted"]

    run(main)


def test_postgres_async_beside_redis_is_a_config_error_and_the_password_never_shows(
    pg_url: str,
) -> None:
    password = urlsplit(pg_url).password
    assert password, pg_url

    async def main() -> None:
        for make in (
            lambda: AsyncClient([pg_url, "redis://127.0.0.1:1"]),
            lambda: AsyncClient.connect(["redis://127.0.0.1:1", pg_url]),
        ):
            with pytest.raises(fencelock.ConfigError) as err:
                made = make()
                if asyncio.iscoroutine(made):
                    await made
            assert err.value.kind == "config"
            for shown in (str(err.value), repr(err.value)):
                assert password not in shown, shown
        client = await AsyncClient.connect(pg_url)
        for shown in (repr(client), str(client), *client.nodes):
            assert password not in shown, shown

    run(main)

"""Read-write locks (docs/protocol.md §4.12): any number of readers or one writer, each grant a
Lock with its own lease, renewal, lost signal and fencing token; a waiting writer is not
overtaken by later readers; sync and asyncio."""

from __future__ import annotations

import _thread
import asyncio
import re
import threading
import time
from typing import Any, Awaitable, Callable, List, Optional, Tuple

import fencelock
import pytest
import redis
from fencelock import (
    AsyncClient,
    AsyncLock,
    AsyncLockContext,
    AsyncRwLock,
    Client,
    Lock,
    LockContext,
    RwLock,
)
from redis_nodes import lock_key


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(main())  # type: ignore[arg-type]


def write_key(name: str) -> str:
    """The writer's key of the read-write lock `name` (docs/protocol.md §2.1)."""
    return f"fencelock:{{{name}}}:rw:write"


def readers_key(name: str) -> str:
    """The set of the reader keys of `name`."""
    return f"fencelock:{{{name}}}:rw:readers"


def writers_key(name: str) -> str:
    """The sorted set of the writers waiting for `name`."""
    return f"fencelock:{{{name}}}:rw:writers"


def queue_key(name: str) -> str:
    """The one queue of the readers and writers waiting for `name`."""
    return f"fencelock:{{{name}}}:rw:queue"


def reader_keys(r: "redis.Redis[str]", name: str) -> List[str]:
    """The reader keys that exist now (the set may still list expired or deleted ones)."""
    return sorted(key for key in r.smembers(readers_key(name)) if r.exists(key))


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


class History:
    """Readers and writers inside a critical section: whether a writer ever shared it, the
    most readers there were at once, and each grant's kind and token in the order of grant."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.readers = 0
        self.writers = 0
        self.peak_readers = 0
        self.writes = 0
        self.clashes: List[str] = []
        self.grants: List[Tuple[str, int]] = []

    def enter(self, kind: str, token: int) -> None:
        # Called as soon as acquire returns, before any release: a writer excludes every other
        # grant, so the order of these calls is the order of the grants around each writer.
        with self._lock:
            self.grants.append((kind, token))
            if kind == "write":
                self.writes += 1
                if self.readers or self.writers:
                    self.clashes.append(
                        f"a writer beside {self.readers} readers, {self.writers} writers"
                    )
                self.writers += 1
            else:
                if self.writers:
                    self.clashes.append("a reader beside a writer")
                self.readers += 1
                self.peak_readers = max(self.peak_readers, self.readers)

    def leave(self, kind: str) -> None:
        with self._lock:
            if kind == "write":
                self.writers -= 1
            else:
                self.readers -= 1

    def token_order_violations(self) -> List[str]:
        """Writers whose token is not above every earlier grant's and below every later one's."""
        found = []
        for i, (kind, token) in enumerate(self.grants):
            if kind != "write":
                continue
            before = [t for _, t in self.grants[:i]]
            after = [t for _, t in self.grants[i + 1 :]]
            if before and token <= max(before):
                found.append(f"writer {i} token {token} <= earlier {max(before)}")
            if after and token >= min(after):
                found.append(f"writer {i} token {token} >= later {min(after)}")
        return found


def test_readers_share_and_a_writer_holds_alone(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    client = Client(url)
    rw = client.rw_lock(resource)
    assert isinstance(rw, RwLock) and isinstance(rw, fencelock.RwLock)
    assert rw.name == resource
    assert repr(rw) == f'<fencelock.RwLock name="{resource}">'

    a = rw.acquire_read(ttl=5, wait=0)
    b = rw.try_read(ttl=5)
    assert isinstance(a, Lock) and isinstance(b, Lock), "readers share"
    assert a.resource == resource and b.resource == resource and a.permit is None
    assert a.is_held() and b.is_held() and not a.lost.is_set()
    # Each reader holds a key of its own, listed in the readers set.
    keys = reader_keys(r1, resource)
    assert len(keys) == 2, keys
    for key in keys:
        assert re.fullmatch(rf"fencelock:\{{{re.escape(resource)}\}}:rw:read:[0-9a-f]{{32}}", key)
    assert r1.exists(write_key(resource)) == 0
    # One counter: a later grant has a larger token.
    assert b.fencing_token > a.fencing_token and a.fence.token == a.fencing_token

    assert rw.try_write(ttl=5) is None, "a writer beside two readers"
    with pytest.raises(fencelock.NotAcquiredError):
        rw.acquire_write(ttl=5, wait=0)
    a.release()
    assert len(reader_keys(r1, resource)) == 1
    with pytest.raises(fencelock.LockTimeoutError):
        rw.acquire_write(ttl=5, wait=0.2)
    # The timed-out waiter has left the queue when the call returns: a release
    # made next is not handed to it.
    assert r1.zcard(queue_key(resource)) == 0, "the timed-out writer is still in line"
    assert rw.try_write(ttl=5) is None, "a writer beside a reader"
    with pytest.raises(fencelock.NotHeldError):
        a.release()
    b.release()
    assert reader_keys(r1, resource) == []

    writer = rw.acquire_write(ttl=5, wait=0)
    assert isinstance(writer, Lock) and writer.resource == resource
    assert writer.fencing_token > b.fencing_token
    assert r1.exists(write_key(resource)) == 1
    assert rw.try_read(ttl=5) is None, "a reader beside a writer"
    assert rw.try_write(ttl=5) is None, "two writers"
    with pytest.raises(fencelock.NotAcquiredError):
        rw.acquire_read(ttl=5, wait=0)
    with pytest.raises(fencelock.LockTimeoutError):
        rw.acquire_read(ttl=5, wait=0.2)
    assert r1.zcard(queue_key(resource)) == 0, "the timed-out reader is still in line"
    # A lock of the same name is another thing.
    with client.lock(resource, ttl=5, wait=0):
        assert r1.exists(lock_key(resource)) == 1
    writer.release()
    assert r1.exists(write_key(resource)) == 0

    # The context managers take and give back.
    context = rw.read(ttl=5, wait=1)
    assert isinstance(context, LockContext)
    with context as reader, rw.read(ttl=5, wait=0) as other:
        assert reader.fencing_token > writer.fencing_token
        assert len(reader_keys(r1, resource)) == 2
        assert reader.is_held() and other.is_held()
    assert reader.status == "released" and reader_keys(r1, resource) == []
    with rw.write(ttl=5, wait=1) as written:
        assert written.fencing_token > other.fencing_token
        assert r1.exists(write_key(resource)) == 1
        assert rw.try_read(ttl=5) is None
    assert written.status == "released" and r1.exists(write_key(resource)) == 0


@pytest.mark.parametrize("n_nodes", [1, 5])
def test_contention_keeps_readers_or_one_writer(
    n_nodes: int, url: str, urls5: List[str], resource: str
) -> None:
    urls = [url] if n_nodes == 1 else urls5
    threads_n, rounds = (8, 12) if n_nodes == 1 else (6, 8)
    history = History()
    errors: List[BaseException] = []

    def work(w: int) -> None:
        try:
            # One client per thread: they contend as separate processes would.
            rw = Client(urls, node_timeout=1).rw_lock(resource)
            for round in range(rounds):
                kind = "write" if (w + round) % 4 == 0 else "read"
                context = rw.write if kind == "write" else rw.read
                with context(ttl=5, wait=60) as lock:
                    history.enter(kind, lock.fencing_token)
                    time.sleep(0.02 if kind == "read" else 0.005)
                    history.leave(kind)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(history.grants) == threads_n * rounds
    assert not history.clashes, history.clashes[:5]
    # Else the workload never wrote or never shared, and the checks above test nothing.
    assert history.writes >= threads_n * rounds // 5, history.writes
    assert history.peak_readers >= 2, "never two readers at once"
    assert not history.token_order_violations(), history.token_order_violations()[:5]
    if n_nodes == 1:
        writes = [t for kind, t in history.grants if kind == "write"]
        assert len(set(writes)) == len(writes), "a writer's token was handed out twice"
    rw = Client(urls).rw_lock(resource)
    last = rw.try_write(ttl=5)
    assert last is not None, "something is still held"
    assert last.fencing_token > max(t for _, t in history.grants)
    last.release()


def test_a_waiting_writer_is_not_overtaken_by_later_readers(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    rw = Client(url).rw_lock(resource)
    first = rw.acquire_read(ttl=30)
    order: List[Tuple[str, int]] = []
    order_lock = threading.Lock()
    errors: List[BaseException] = []

    def take(kind: str, hold: float) -> None:
        try:
            other = Client(url).rw_lock(resource)
            acquire = other.acquire_write if kind == "write" else other.acquire_read
            lock = acquire(ttl=10, wait=20)
            with order_lock:
                order.append((kind, lock.fencing_token))
            time.sleep(hold)
            lock.release()
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    writer = threading.Thread(target=take, args=("write", 0.2))
    writer.start()
    assert wait_until(lambda: r1.zcard(writers_key(resource)) == 1), "the writer never queued"
    # Readers that come now wait behind the writer, though only a reader holds the lock.
    assert rw.try_read(ttl=5) is None, "a reader got in ahead of a waiting writer"
    late = [threading.Thread(target=take, args=("read", 0.05)) for _ in range(3)]
    for t in late:
        t.start()
    assert wait_until(lambda: r1.zcard(queue_key(resource)) == 4), "the late readers never queued"
    time.sleep(0.2)
    assert order == [], f"got in while the first reader held: {order}"
    first.release()
    for t in [writer, *late]:
        t.join(timeout=30)
    assert not errors, errors
    assert [kind for kind, _ in order] == ["write", "read", "read", "read"], order
    writer_token = order[0][1]
    assert writer_token > first.fencing_token
    assert all(token > writer_token for _, token in order[1:]), order
    assert r1.zcard(writers_key(resource)) == 0 and r1.zcard(queue_key(resource)) == 0


def test_a_reader_loses_its_own_key_alone(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    rw = Client(url).rw_lock(resource)
    calls: List[Tuple[str, str]] = []

    def on_lost(name: str, reason: str) -> None:
        calls.append((name, reason))

    a = rw.acquire_read(ttl=1, on_lost=on_lost)
    b = rw.acquire_read(ttl=1, on_lost=on_lost)
    time.sleep(0.8)
    assert a.renewals >= 1 and b.renewals >= 1, "the readers were not renewed"
    keys = reader_keys(r1, resource)
    assert len(keys) == 2
    assert 0 < r1.pttl(keys[0]) <= 1000
    r1.delete(keys[0])
    assert wait_until(lambda: a.lost.is_set() or b.lost.is_set(), 3), "no loss was signalled"
    lost, kept = (a, b) if a.lost.is_set() else (b, a)
    assert lost.lost.reason == "deleted" and lost.status == "lost"
    assert wait_until(lambda: calls == [(resource, "deleted")]), calls
    with pytest.raises(fencelock.NotHeldError):
        lost.release()
    # The other reader keeps its own lease: still held and renewed well past its ttl.
    renewals = kept.renewals
    time.sleep(0.8)
    assert kept.is_held() and not kept.lost.is_set() and kept.renewals > renewals
    assert reader_keys(r1, resource) == keys[1:]
    assert rw.try_write(ttl=5) is None, "a writer beside the remaining reader"
    kept.release()
    writer = rw.try_write(ttl=5)
    assert writer is not None
    writer.release()


def test_a_waiting_acquire_is_woken_by_a_release(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    rw = Client(url).rw_lock(resource)
    other = Client(url).rw_lock(resource)
    for held_kind, waiting_kind in (("write", "read"), ("read", "write")):
        held = rw.acquire_write(ttl=30) if held_kind == "write" else rw.acquire_read(ttl=30)
        got: List[Lock] = []
        acquire = other.acquire_write if waiting_kind == "write" else other.acquire_read
        waiter = threading.Thread(target=lambda: got.append(acquire(ttl=5, wait=20)))
        waiter.start()
        assert wait_until(lambda: r1.zcard(queue_key(resource)) == 1), "the waiter never queued"
        time.sleep(0.1)
        assert not got, f"a {waiting_kind} beside a {held_kind}"
        released = time.monotonic()
        held.release()
        waiter.join(timeout=10)
        elapsed = time.monotonic() - released
        assert got, f"the waiting {waiting_kind} never got in"
        # The holder's key lives 30 s: only the release can have let it in, and the push
        # brought it well within a waiter's own pause.
        assert elapsed < 0.5, f"{waiting_kind} after {held_kind}: took {elapsed:.3f} s"
        assert got[0].fencing_token > held.fencing_token
        assert r1.zcard(queue_key(resource)) == 0
        got[0].release()


def test_interrupt_main_interrupts_a_waiting_writer(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    rw = Client(url).rw_lock(resource)
    reader = rw.acquire_read(ttl=30)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            Client(url).rw_lock(resource).acquire_write(ttl=5, wait=120)
    finally:
        # Should the writer get in at once (a bug), the interrupt must not hit the test run.
        timer.cancel()
    assert time.monotonic() - started < 5
    # The interrupted writer left the line: readers are let in again.
    assert wait_until(lambda: r1.zcard(writers_key(resource)) == 0)
    second = rw.try_read(ttl=5)
    assert second is not None, "the interrupted writer still holds readers back"
    second.release()
    reader.release()
    time.sleep(0.3)
    assert r1.exists(write_key(resource)) == 0


def test_a_stale_writer_is_refused_by_the_store(urls5: List[str], resource: str) -> None:
    client = Client(urls5)
    rw = client.rw_lock(resource)
    first = rw.acquire_write(ttl=0.2, auto_renew=False)
    assert first.lost.wait(3) and first.lost.reason == "expired"
    with rw.read(ttl=2, wait=2) as reader:
        assert reader.fencing_token > first.fencing_token
    with rw.write(ttl=2, wait=2) as second:
        assert second.fencing_token > reader.fencing_token
        client.fenced_set(f"data:{resource}", "second", second.fence)
        with pytest.raises(fencelock.StaleTokenError):
            client.fenced_set(f"data:{resource}", "first", first.fence)
    assert client.fenced_get(f"data:{resource}") == ("second", second.fencing_token)


def test_bad_names_and_options_are_refused(url: str, resource: str) -> None:
    client = Client(url)
    for bad in ("", "}starts-with-a-brace", "x" * (fencelock.MAX_RESOURCE_LEN + 1)):
        with pytest.raises(fencelock.InvalidArgumentError):
            client.rw_lock(bad)
    with pytest.raises(TypeError, match="name must be str"):
        client.rw_lock(b"bytes")  # type: ignore[arg-type]
    rw = client.rw_lock(resource)
    with pytest.raises(fencelock.InvalidArgumentError, match="ttl must be greater than zero"):
        rw.acquire_read(ttl=0)
    with pytest.raises(fencelock.InvalidArgumentError, match="wait must be zero or more"):
        rw.write(ttl=1, wait=-1)
    with pytest.raises(TypeError, match="on_lost must be callable"):
        rw.try_write(ttl=1, on_lost=3)
    for call, name in (
        (rw.acquire_read, "RwLock.acquire_read()"),
        (rw.acquire_write, "RwLock.acquire_write()"),
        (rw.read, "RwLock.read()"),
        (rw.write, "RwLock.write()"),
    ):
        with pytest.raises(
            TypeError, match=rf"^{re.escape(name)} got an unexpected keyword argument 'retry'$"
        ):
            call(retry=None)
    for try_call, name in (
        (rw.try_read, "RwLock.try_read()"),
        (rw.try_write, "RwLock.try_write()"),
    ):
        with pytest.raises(
            TypeError, match=rf"^{re.escape(name)} got an unexpected keyword argument 'wait'$"
        ):
            try_call(wait=1)  # type: ignore[call-arg]
    # Nothing was taken by the refused calls.
    with rw.write(ttl=5, wait=0):
        pass


def test_the_lock_options_apply_to_readers_and_writers(url: str, resource: str) -> None:
    rw = Client(url).rw_lock(resource)
    # Each option of the stubs' LockOptions is accepted (None keeps its default).
    for key in ("auto_renew", "max_hold", "max_renewals", "fair", "on_lost"):
        for try_call in (rw.try_read, rw.try_write):
            lock = try_call(ttl=5, **{key: None})
            assert lock is not None
            lock.release()
        with rw.read(ttl=5, **{key: None}), rw.read(ttl=5, **{key: None}):
            pass
        with rw.write(ttl=5, **{key: None}):
            pass
    fixed = rw.acquire_read(ttl=0.3, auto_renew=False)
    assert fixed.lost.wait(3) and fixed.lost.reason == "expired"
    fixed = rw.acquire_write(ttl=0.3, auto_renew=False)
    assert fixed.lost.wait(3) and fixed.lost.reason == "expired"
    # fair=True waits in line too, and a bounded wait still times out.
    reader = rw.acquire_read(ttl=5)
    with pytest.raises(fencelock.LockTimeoutError):
        rw.acquire_write(ttl=5, wait=0.2, fair=True)
    reader.release()


def test_async_rw_lock(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    async def main() -> None:
        client = AsyncClient(url)
        rw = client.rw_lock(resource)
        assert isinstance(rw, AsyncRwLock)
        assert rw.name == resource
        assert repr(rw) == f'<fencelock.AsyncRwLock name="{resource}">'

        history = History()

        async def worker(w: int) -> None:
            # A client per task: as separate processes would.
            mine = AsyncClient(url).rw_lock(resource)
            for round in range(6):
                kind = "write" if (w + round) % 3 == 0 else "read"
                context = mine.write if kind == "write" else mine.read
                async with context(ttl=5, wait=30) as lock:
                    assert isinstance(lock, AsyncLock)
                    history.enter(kind, lock.fencing_token)
                    await asyncio.sleep(0.02 if kind == "read" else 0.005)
                    history.leave(kind)

        await asyncio.gather(*(worker(w) for w in range(6)))
        assert len(history.grants) == 36
        assert not history.clashes, history.clashes[:5]
        assert history.writes == 12 and history.peak_readers >= 2, history.peak_readers
        assert not history.token_order_violations(), history.token_order_violations()[:5]

        a = await rw.acquire_read(ttl=5, wait=0)
        b = await rw.try_read(ttl=5)
        assert isinstance(a, AsyncLock) and isinstance(b, AsyncLock)
        assert len(reader_keys(r1, resource)) == 2
        assert await rw.try_write(ttl=5) is None
        with pytest.raises(fencelock.LockTimeoutError):
            await rw.acquire_write(ttl=5, wait=0.1)

        # The lost signal is awaitable as for a lock; the other reader stays.
        r1.delete(reader_keys(r1, resource)[0])
        lost = await asyncio.wait_for(
            asyncio.wait(
                [asyncio.ensure_future(x.lost.wait_async(3)) for x in (a, b)],
                return_when=asyncio.FIRST_COMPLETED,
            ),
            5,
        )
        assert lost
        gone, kept = (a, b) if a.lost.is_set() else (b, a)
        assert gone.lost.reason == "deleted"
        await asyncio.sleep(0.1)
        assert kept.is_held() and not kept.lost.is_set()

        # A waiting writer is woken by the last reader's release.
        other = AsyncClient(url).rw_lock(resource)
        waiting = asyncio.ensure_future(other.acquire_write(ttl=5, wait=20))
        while r1.zcard(writers_key(resource)) != 1:
            await asyncio.sleep(0.01)
        assert not waiting.done()
        assert await rw.try_read(ttl=5) is None, "a reader got in ahead of a waiting writer"
        await kept.release()
        writer = await asyncio.wait_for(waiting, 5)
        assert writer.fencing_token > kept.fencing_token
        assert r1.exists(write_key(resource)) == 1
        assert await rw.try_read(ttl=5) is None
        await writer.release()

        # The context managers are the async lock contexts.
        context = rw.write(ttl=5)
        assert isinstance(context, AsyncLockContext)
        async with context as written:
            assert r1.exists(write_key(resource)) == 1
        assert written.status == "released"

    run(main)


def test_cancelling_a_waiting_async_acquire_takes_nothing(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    async def main() -> None:
        rw = AsyncClient(url).rw_lock(resource)
        reader = await rw.acquire_read(ttl=30)
        task = asyncio.ensure_future(
            AsyncClient(url).rw_lock(resource).acquire_write(ttl=5, wait=60)
        )
        while r1.zcard(writers_key(resource)) != 1:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The cancelled writer leaves the line (in the background): readers are let in again.
        assert await asyncio.to_thread(wait_until, lambda: r1.zcard(writers_key(resource)) == 0)
        second = await rw.try_read(ttl=5)
        assert second is not None, "the cancelled writer still holds readers back"
        await second.release()
        await reader.release()
        await asyncio.sleep(0.3)
        assert r1.exists(write_key(resource)) == 0
        # `async with` releases even when the block raises.
        with pytest.raises(RuntimeError, match="boom"):
            async with rw.write(ttl=5) as lock:
                assert r1.exists(write_key(resource)) == 1 and lock.is_held()
                raise RuntimeError("boom")
        assert r1.exists(write_key(resource)) == 0
        with pytest.raises(RuntimeError, match="boom"):
            async with rw.read(ttl=5):
                assert len(reader_keys(r1, resource)) == 1
                raise RuntimeError("boom")
        assert reader_keys(r1, resource) == []

    run(main)


def test_async_bad_arguments(url: str, resource: str) -> None:
    client = AsyncClient(url)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.rw_lock("")
    rw = client.rw_lock(resource)
    with pytest.raises(
        TypeError,
        match=r"^AsyncRwLock.try_write\(\) got an unexpected keyword argument 'wait'$",
    ):
        rw.try_write(wait=1)  # type: ignore[call-arg]
    with pytest.raises(fencelock.InvalidArgumentError, match="ttl must be greater than zero"):
        rw.acquire_read(ttl=0)


def test_a_closed_client_refuses_readers_and_writers(url: str, resource: str) -> None:
    client = Client(url)
    rw = client.rw_lock(resource)
    client.close()
    calls: List[Callable[[], Optional[Lock]]] = [
        lambda: rw.acquire_read(ttl=5, wait=0),
        lambda: rw.acquire_write(ttl=5, wait=0),
        lambda: rw.try_read(ttl=5),
        lambda: rw.try_write(ttl=5),
    ]
    for call in calls:
        with pytest.raises(fencelock.ClosedError):
            call()

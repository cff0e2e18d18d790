"""Counting semaphores (docs/protocol.md §4.11): at most `permits` holders at once, each
holding a Lock with its own permit number, renewal, lost signal and fencing token; sync and
asyncio."""

from __future__ import annotations

import _thread
import asyncio
import threading
import time
from typing import Any, Awaitable, Callable, List, Optional, Set, Tuple

import fencelock
import pytest
import redis
from fencelock import (
    MAX_PERMITS,
    AsyncClient,
    AsyncLock,
    AsyncSemaphore,
    Client,
    Lock,
    LockContext,
    Semaphore,
)
from redis_nodes import lock_key


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(main())  # type: ignore[arg-type]


def permit_key(name: str, permit: Optional[int]) -> str:
    """The key of one permit of the semaphore `name` (docs/protocol.md §2.1)."""
    assert permit is not None
    return f"fencelock:{{{name}}}:sem:{permit}"


def queue_key(name: str) -> str:
    return f"fencelock:{{{name}}}:sem:queue"


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


class Occupancy:
    """Counts the holders inside a critical section, and the most there ever were."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.inside = 0
        self.peak = 0
        self.entries = 0
        self.permits_inside: Set[int] = set()
        self.clashes: List[int] = []

    def enter(self, permit: Optional[int]) -> None:
        assert permit is not None
        with self._lock:
            self.inside += 1
            self.entries += 1
            self.peak = max(self.peak, self.inside)
            if permit in self.permits_inside:
                self.clashes.append(permit)
            self.permits_inside.add(permit)

    def leave(self, permit: Optional[int]) -> None:
        with self._lock:
            self.inside -= 1
            self.permits_inside.discard(permit)  # type: ignore[arg-type]


def test_semaphore_lifecycle(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    client = Client(url)
    sem = client.semaphore(resource, 2)
    assert isinstance(sem, Semaphore) and isinstance(sem, fencelock.Semaphore)
    assert (sem.name, sem.permits) == (resource, 2)
    assert repr(sem) == f'<fencelock.Semaphore name="{resource}" permits=2>'
    assert sem.holders() == 0

    a = sem.acquire(ttl=5, wait=0)
    b = sem.try_acquire(ttl=5)
    assert isinstance(a, Lock) and isinstance(b, Lock)
    assert a.resource == resource and b.resource == resource
    assert {a.permit, b.permit} == {0, 1}, "two holders on one permit"
    assert f"permit={a.permit}" in repr(a)
    for held in (a, b):
        assert held.is_held() and held.status == "held" and not held.lost.is_set()
        assert r1.get(permit_key(resource, held.permit)) is not None
    # One counter for the semaphore: a later grant has a larger token.
    assert b.fencing_token > a.fencing_token and a.fence.token == a.fencing_token
    assert sem.holders() == 2

    # Full: one attempt gives None, a bounded wait times out.
    assert sem.try_acquire(ttl=5) is None
    with pytest.raises(fencelock.NotAcquiredError):
        sem.acquire(ttl=5, wait=0)
    with pytest.raises(fencelock.LockTimeoutError):
        sem.acquire(ttl=5, wait=0.2)
    # The timed-out waiter has left the queue when the call returns: a release
    # made next is not handed to it.
    assert r1.zcard(queue_key(resource)) == 0, "the timed-out waiter is still in line"

    a.release()
    assert r1.exists(permit_key(resource, a.permit)) == 0
    assert sem.holders() == 1
    with pytest.raises(fencelock.NotHeldError):
        a.release()

    # The context manager takes the free permit and gives it back.
    context = sem.permit(ttl=5, wait=1)
    assert isinstance(context, LockContext)
    with context as held:
        assert isinstance(held, Lock) and held.permit == a.permit
        assert held.fencing_token > b.fencing_token
        assert sem.holders() == 2
    assert held.status == "released" and sem.holders() == 1

    # A lock of the same name is another thing; a plain lock has no permit.
    with client.lock(resource, ttl=5, wait=0) as plain:
        assert plain.permit is None and "permit=" not in repr(plain)
        assert r1.exists(lock_key(resource)) == 1
    b.release()
    assert sem.holders() == 0


@pytest.mark.parametrize("n_nodes", [1, 5])
def test_threads_never_exceed_the_permits(
    n_nodes: int, url: str, urls5: List[str], resource: str
) -> None:
    urls = [url] if n_nodes == 1 else urls5
    permits, threads_n, rounds = (3, 8, 12) if n_nodes == 1 else (2, 6, 8)
    occupancy = Occupancy()
    errors: List[BaseException] = []
    tokens: List[int] = []

    def work() -> None:
        try:
            # One client per thread: they contend as separate processes would.
            sem = Client(urls, node_timeout=1).semaphore(resource, permits)
            for _ in range(rounds):
                with sem.permit(ttl=5, wait=60) as lock:
                    occupancy.enter(lock.permit)
                    tokens.append(lock.fencing_token)
                    time.sleep(0.01)
                    occupancy.leave(lock.permit)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert occupancy.entries == threads_n * rounds
    assert occupancy.peak <= permits, f"{occupancy.peak} holders of {permits} permits"
    assert not occupancy.clashes, f"two holders at once on permits {occupancy.clashes}"
    # Else the workload never overlapped and the bound above tests nothing.
    assert occupancy.peak >= 2, "never two holders at once"
    if n_nodes == 1:
        assert len(set(tokens)) == len(tokens), "a fencing token was handed out twice"
    assert Client(urls).semaphore(resource, permits).holders() == 0


def test_a_permits_mismatch_is_a_clear_invalid_argument(url: str, resource: str) -> None:
    two = Client(url).semaphore(resource, 2)
    held = two.acquire(ttl=5, wait=0)
    three = Client(url).semaphore(resource, 3)
    for attempt in (
        lambda: three.acquire(ttl=5, wait=1),
        lambda: three.try_acquire(ttl=5),
        lambda: three.permit(ttl=5, wait=0).__enter__(),
    ):
        with pytest.raises(fencelock.InvalidArgumentError, match="has 2 permits") as err:
            attempt()
        assert isinstance(err.value, ValueError)
        assert f"semaphore '{resource}' (3 permits)" in str(err.value)
    # The right size still works alongside.
    other = Client(url).semaphore(resource, 2).try_acquire(ttl=5)
    assert other is not None and other.permit != held.permit
    other.release()
    held.release()


def test_bad_permits_and_names_are_refused(url: str, resource: str) -> None:
    client = Client(url)
    assert MAX_PERMITS == 256
    assert client.semaphore(resource, 1).permits == 1
    assert client.semaphore(resource, MAX_PERMITS).permits == MAX_PERMITS
    for permits in (0, MAX_PERMITS + 1, -1, 2**40):
        with pytest.raises(fencelock.InvalidArgumentError, match="1 to 256 permits") as err:
            client.semaphore(resource, permits)
        assert f"{permits} were asked" in str(err.value)
    with pytest.raises(fencelock.InvalidArgumentError, match="not a bool"):
        client.semaphore(resource, True)
    for wrong in ("3", 2.0, None):
        with pytest.raises(TypeError, match="permits must be an int"):
            client.semaphore(resource, wrong)  # type: ignore[arg-type]
    with pytest.raises(fencelock.InvalidArgumentError):
        client.semaphore("", 2)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.semaphore("}starts-with-a-brace", 2)
    with pytest.raises(TypeError, match="name must be str"):
        client.semaphore(b"bytes", 2)  # type: ignore[arg-type]
    # Permit calls check their arguments as Client.acquire does.
    sem = client.semaphore(resource, 2)
    with pytest.raises(fencelock.InvalidArgumentError, match="ttl must be greater than zero"):
        sem.acquire(ttl=0)
    with pytest.raises(fencelock.InvalidArgumentError, match="wait must be zero or more"):
        sem.permit(ttl=1, wait=-1)
    with pytest.raises(TypeError, match="on_lost must be callable"):
        sem.try_acquire(ttl=1, on_lost=3)
    with pytest.raises(
        TypeError, match=r"^Semaphore.acquire\(\) got an unexpected keyword argument 'retry'$"
    ):
        sem.acquire(retry=None)  # type: ignore[call-arg]


def test_the_lock_options_apply_to_permits(url: str, resource: str) -> None:
    sem = Client(url).semaphore(resource, 1)
    # Each option of the stubs' LockOptions is accepted (None keeps its default).
    for key in ("auto_renew", "max_hold", "max_renewals", "fair", "on_lost"):
        lock = sem.try_acquire(ttl=5, **{key: None})
        assert lock is not None
        lock.release()
        with sem.permit(ttl=5, **{key: None}):
            pass
    fixed = sem.acquire(ttl=0.3, auto_renew=False)
    assert fixed.lost.wait(3) and fixed.lost.reason == "expired"


def test_a_permit_renews_and_signals_its_loss(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    sem = Client(url).semaphore(resource, 2)
    calls: List[Tuple[str, str]] = []
    other = sem.acquire(ttl=5)
    lock = sem.acquire(ttl=1, on_lost=lambda name, reason: calls.append((name, reason)))
    time.sleep(1.5)
    assert lock.is_held() and lock.renewals >= 1, "the permit was not renewed"
    assert 0 < r1.pttl(permit_key(resource, lock.permit)) <= 1000
    r1.delete(permit_key(resource, lock.permit))
    assert lock.lost.wait(3), "the loss of the permit was not signalled"
    assert lock.lost.reason == "deleted" and lock.status == "lost"
    assert wait_until(lambda: calls == [(resource, "deleted")]), calls
    with pytest.raises(fencelock.NotHeldError):
        lock.release()
    # Losing one permit leaves the other holder alone.
    assert other.is_held() and not other.lost.is_set()
    # A block whose permit was lost meanwhile raises on exit.
    with pytest.raises(fencelock.NotHeldError):
        with sem.permit(ttl=5, wait=1) as inside:
            r1.delete(permit_key(resource, inside.permit))
            assert inside.lost.wait(3)
    other.release()


def test_a_waiting_acquire_is_woken_when_a_permit_is_released(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    sem = Client(url).semaphore(resource, 2)
    held = [sem.acquire(ttl=30), sem.acquire(ttl=30)]
    got: List[Lock] = []
    waiter = threading.Thread(
        target=lambda: got.append(Client(url).semaphore(resource, 2).acquire(ttl=5, wait=20))
    )
    waiter.start()
    assert wait_until(lambda: r1.zcard(queue_key(resource)) == 1), "the waiter never queued"
    time.sleep(0.1)
    assert not got, "a third holder of two permits"
    released = time.monotonic()
    held[1].release()
    waiter.join(timeout=10)
    elapsed = time.monotonic() - released
    assert got, "the waiter never got the released permit"
    # The holders' keys live 30 s: only the release can have let it in, and the push
    # brought it well within a waiter's own pause.
    assert elapsed < 0.5, f"took {elapsed:.3f} s"
    assert got[0].permit == held[1].permit
    assert r1.zcard(queue_key(resource)) == 0
    got[0].release()
    held[0].release()


def test_interrupt_main_interrupts_a_waiting_permit(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    sem = Client(url).semaphore(resource, 1)
    holder = sem.acquire(ttl=30)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        Client(url).semaphore(resource, 1).acquire(ttl=5, wait=120)
    assert time.monotonic() - started < 5
    timer.join()
    holder.release()
    time.sleep(0.3)
    # The interrupted attempt took nothing.
    assert r1.exists(permit_key(resource, 0)) == 0
    assert sem.holders() == 0


def test_holders_counts_a_majority_on_five_nodes(urls5: List[str], resource: str) -> None:
    sem = Client(urls5).semaphore(resource, 3)
    assert sem.holders() == 0
    locks = [sem.acquire(ttl=5, wait=0) for _ in range(3)]
    assert sorted(lock.permit for lock in locks) == [0, 1, 2]  # type: ignore[type-var]
    assert sem.holders() == 3
    assert sem.try_acquire(ttl=5) is None
    locks[0].release()
    assert sem.holders() == 2
    for lock in locks[1:]:
        lock.release()
    assert sem.holders() == 0


def test_async_semaphore(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    async def main() -> None:
        client = AsyncClient(url)
        sem = client.semaphore(resource, 3)
        assert isinstance(sem, AsyncSemaphore)
        assert (sem.name, sem.permits) == (resource, 3)
        assert repr(sem) == f'<fencelock.AsyncSemaphore name="{resource}" permits=3>'
        assert await sem.holders() == 0

        occupancy = Occupancy()

        async def worker() -> None:
            for _ in range(6):
                async with sem.permit(ttl=5, wait=30) as lock:
                    assert isinstance(lock, AsyncLock)
                    occupancy.enter(lock.permit)
                    await asyncio.sleep(0.01)
                    occupancy.leave(lock.permit)

        await asyncio.gather(*(worker() for _ in range(8)))
        assert occupancy.entries == 48
        assert 2 <= occupancy.peak <= 3, occupancy.peak
        assert not occupancy.clashes
        assert await sem.holders() == 0

        a = await sem.acquire(ttl=5, wait=0)
        b = await sem.try_acquire(ttl=5)
        c = await sem.acquire(ttl=5)
        assert isinstance(a, AsyncLock) and isinstance(b, AsyncLock)
        assert sorted([a.permit, b.permit, c.permit]) == [0, 1, 2]  # type: ignore[type-var]
        assert await sem.holders() == 3
        assert await sem.try_acquire(ttl=5) is None
        with pytest.raises(fencelock.LockTimeoutError):
            await sem.acquire(ttl=5, wait=0.1)

        # A mismatch raises from the coroutine.
        with pytest.raises(fencelock.InvalidArgumentError, match="has 3 permits"):
            await client.semaphore(resource, 4).acquire(ttl=5, wait=0)

        # The lost signal is awaitable as for a lock.
        r1.delete(permit_key(resource, c.permit))
        assert await c.lost.wait_async(3) and c.lost.reason == "deleted"

        # A waiter is woken by a release; the released permit is what it gets.
        other = AsyncClient(url).semaphore(resource, 3)
        r1.set(permit_key(resource, c.permit), "someone-else", px=30_000)
        waiting = asyncio.ensure_future(other.acquire(ttl=5, wait=20))
        while r1.zcard(queue_key(resource)) != 1:
            await asyncio.sleep(0.01)
        assert not waiting.done()
        await b.release()
        got = await asyncio.wait_for(waiting, 5)
        assert got.permit == b.permit
        await got.release()
        await a.release()
        r1.delete(permit_key(resource, c.permit))
        assert await sem.holders() == 0

    run(main)


def test_cancelling_a_waiting_async_acquire_takes_no_permit(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    async def main() -> None:
        sem = AsyncClient(url).semaphore(resource, 1)
        holder = await sem.acquire(ttl=30)
        task = asyncio.ensure_future(
            AsyncClient(url).semaphore(resource, 1).acquire(ttl=5, wait=60)
        )
        while r1.zcard(queue_key(resource)) != 1:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await holder.release()
        await asyncio.sleep(0.3)
        # The cancelled waiter left the line and took nothing.
        assert r1.exists(permit_key(resource, 0)) == 0
        assert await sem.holders() == 0
        # `async with` releases even when the block raises.
        with pytest.raises(RuntimeError, match="boom"):
            async with sem.permit(ttl=5) as lock:
                assert r1.exists(permit_key(resource, lock.permit)) == 1
                raise RuntimeError("boom")
        assert r1.exists(permit_key(resource, 0)) == 0

    run(main)


def test_async_bad_permits(url: str, resource: str) -> None:
    client = AsyncClient(url)
    for permits in (0, MAX_PERMITS + 1):
        with pytest.raises(fencelock.InvalidArgumentError, match="1 to 256 permits"):
            client.semaphore(resource, permits)
    with pytest.raises(
        TypeError,
        match=r"^AsyncSemaphore.try_acquire\(\) got an unexpected keyword argument 'wait'$",
    ):
        client.semaphore(resource, 2).try_acquire(wait=1)  # type: ignore[call-arg]

"""Leader election: campaign, resign, the lost signal, and observers (sync and asyncio)."""

from __future__ import annotations

import _thread
import asyncio
import math
import threading
import time
from typing import Any, Awaitable, Callable, List

import fencelock
import pytest
import redis
from fencelock import (
    MAX_LEADER_VALUE,
    MAX_RESOURCE_LEN,
    AsyncClient,
    AsyncLeadership,
    Client,
    Leader,
    Leadership,
)
from redis_nodes import lock_key


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(main())  # type: ignore[arg-type]


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def observers(r: "redis.Redis[str]", name: str) -> int:
    """Subscribers of the election's channel (docs/protocol.md §4.10)."""
    channel = f"fencelock:leader:{name}"
    return int(dict(r.pubsub_numsub(channel))[channel])


def in_line(r: "redis.Redis[str]", name: str) -> int:
    """Candidates waiting in the election lock's queue."""
    return int(r.zcard(lock_key(name) + ":queue"))


def test_campaign_leads_until_it_resigns(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    client = Client(url)
    leader = client.campaign(resource, ttl=5, value="host-a:1")
    assert isinstance(leader, Leadership) and isinstance(leader, fencelock.Leadership)
    assert leader.is_leader() and leader.status == "held"
    assert (leader.name, leader.value) == (resource, b"host-a:1")
    assert leader.epoch >= 1 and leader.epoch == leader.fence.token == leader.fencing_token
    assert not leader.lost.is_set()
    assert r1.exists(lock_key(resource)) == 1
    assert f"epoch={leader.epoch}" in repr(leader) and "b'host-a:1'" in repr(leader)
    # The epoch fences the leader's writes like a lock's token.
    client.fenced_set(f"{resource}:data", "by the leader", leader.fence)

    leader.resign()
    assert r1.exists(lock_key(resource)) == 0
    assert not leader.is_leader() and leader.status == "released"
    assert not leader.lost.is_set(), "resigning is not losing"
    with pytest.raises(fencelock.NotHeldError):
        leader.resign()
    again = client.campaign(resource, ttl=5, value=b"\x00\xffbin")
    assert again.epoch > leader.epoch and again.value == b"\x00\xffbin"
    again.resign()


def test_a_waiting_candidate_wins_at_once_when_the_leader_resigns(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    first = Client(url).campaign(resource, ttl=5, value="a")
    other = Client(url)
    # A bounded campaign gives up; with wait=0 it makes one attempt.
    with pytest.raises(fencelock.LockTimeoutError):
        other.campaign(resource, ttl=5, wait=0.2)
    with pytest.raises(fencelock.NotAcquiredError):
        other.campaign(resource, ttl=5, wait=0)

    won: List[Leadership] = []
    candidate = threading.Thread(
        target=lambda: won.append(other.campaign(resource, ttl=5, value="b"))
    )
    candidate.start()
    assert wait_until(lambda: in_line(r1, resource) == 1), "the candidate never got in line"
    resigned = time.monotonic()
    first.resign()
    candidate.join(timeout=5)
    elapsed = time.monotonic() - resigned
    assert won, "the waiting candidate was not elected"
    assert elapsed < 1.0, f"took {elapsed:.3f} s"
    second = won[0]
    assert second.epoch > first.epoch and second.value == b"b" and second.is_leader()
    second.resign()


def test_an_observer_learns_each_new_leader_by_push(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    observation = Client(url).observe(resource)
    assert observation.name == resource and not observation.closed
    assert wait_until(lambda: observers(r1, resource) == 1), "the observer never subscribed"
    assert observation.next(timeout=0.2) is None, "no leader yet"

    candidates = [Client(url), Client(url)]
    epochs = []
    for value, client in zip([b"first", b"second"], candidates):
        leader = client.campaign(resource, ttl=5, value=value)
        elected = time.monotonic()
        # Well within the observer's own 2 s re-read: the push brought it.
        seen = observation.next(timeout=1.0)
        assert time.monotonic() - elected < 1.0
        assert seen == Leader(value, leader.epoch)
        assert seen is not None and seen.value == value and seen.epoch == leader.epoch
        epochs.append(leader.epoch)
        leader.resign()
    assert epochs[1] > epochs[0]
    observation.close()


def test_an_observer_starts_with_the_current_leader(url: str, resource: str) -> None:
    leader = Client(url).campaign(resource, ttl=5, value="current")
    with Client(url).observe(resource) as observation:
        assert next(observation) == Leader(b"current", leader.epoch)
    assert observation.closed
    leader.resign()


def test_closing_an_observation_ends_its_iteration(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    observation = Client(url).observe(resource)
    assert wait_until(lambda: observers(r1, resource) == 1)
    seen: List[Leader] = []
    consumer = threading.Thread(target=lambda: seen.extend(observation))
    consumer.start()
    leader = Client(url).campaign(resource, ttl=5, value="x")
    assert wait_until(lambda: len(seen) == 1, timeout=2)
    observation.close()  # from another thread than the one iterating
    consumer.join(timeout=2)
    assert not consumer.is_alive(), "the iteration did not end on close()"
    assert seen == [Leader(b"x", leader.epoch)]
    assert observation.closed and "closed" in repr(observation)
    assert wait_until(lambda: observers(r1, resource) == 0), "close() kept the subscription"
    assert observation.next(timeout=0.1) is None
    with pytest.raises(StopIteration):
        next(observation)
    observation.close()  # idempotent
    leader.resign()


def test_ctrl_c_interrupts_a_waiting_observation_and_loses_nothing(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    observation = Client(url).observe(resource)
    assert wait_until(lambda: observers(r1, resource) == 1)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        next(observation)
    timer.join()
    assert time.monotonic() - started < 2.0
    # The interrupted wait dropped nothing: the next one still gets the leader.
    leader = Client(url).campaign(resource, ttl=5, value="after")
    assert observation.next(timeout=1.0) == Leader(b"after", leader.epoch)
    observation.close()
    leader.resign()


@pytest.mark.parametrize(
    "provoke, reason",
    [
        (lambda r, key: r.delete(key), "deleted"),
        (lambda r, key: r.set(key, "someone-else", px=5000), "taken_over"),
    ],
)
def test_the_lost_signal_fires_when_the_election_key_goes(
    url: str,
    resource: str,
    r1: "redis.Redis[str]",
    provoke: Callable[["redis.Redis[str]", str], object],
    reason: str,
) -> None:
    leader = Client(url).campaign(resource, ttl=0.3)
    assert leader.lost.wait(timeout=0.01) is False
    provoke(r1, lock_key(resource))
    assert leader.lost.wait(timeout=5) is True
    assert leader.lost.is_set() and leader.lost.reason == reason
    assert not leader.is_leader() and leader.status == "lost"
    with pytest.raises(fencelock.NotHeldError):
        leader.resign()


def test_with_resigns_on_exit(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    client = Client(url)
    with client.campaign(resource, ttl=5) as leader:
        assert r1.exists(lock_key(resource)) == 1 and leader.is_leader()
    assert r1.exists(lock_key(resource)) == 0 and leader.status == "released"

    with pytest.raises(RuntimeError, match="boom"):
        with client.campaign(resource, ttl=5) as leader:
            raise RuntimeError("boom")
    assert r1.exists(lock_key(resource)) == 0

    # Lost inside the block: leaving it says so.
    with pytest.raises(fencelock.NotHeldError):
        with client.campaign(resource, ttl=0.3) as leader:
            r1.delete(lock_key(resource))
            assert leader.lost.wait(timeout=5)


def test_leader_values(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    assert Leader(b"a", 1) == Leader("a", 1) and hash(Leader(b"a", 1)) == hash(Leader("a", 1))
    assert Leader(b"a", 1) != Leader(b"a", 2) and Leader(b"a", 1) != (b"a", 1)
    assert repr(Leader(b"a b", 7)) == "Leader(value=b'a b', epoch=7)"
    assert Leader("é", 3).value == "é".encode()
    with pytest.raises(AttributeError):
        Leader(b"a", 1).epoch = 2  # type: ignore[misc]

    client = Client(url)
    # The longest value a leader may announce goes through, byte for byte.
    biggest = bytes(range(256)) * (MAX_LEADER_VALUE // 256)
    assert len(biggest) == MAX_LEADER_VALUE
    with client.observe(resource) as observation:
        leader = client.campaign(resource, ttl=5, value=biggest)
        assert leader.value == biggest
        assert observation.next(timeout=2) == Leader(biggest, leader.epoch)
        assert f"<{MAX_LEADER_VALUE} bytes>" in repr(leader)
        leader.resign()


def test_bad_input_raises_the_usual_errors(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    client = Client(url)
    with pytest.raises(fencelock.InvalidArgumentError, match="leader value"):
        client.campaign(resource, ttl=5, value=b"x" * (MAX_LEADER_VALUE + 1))
    # The limit is in bytes: 2 bytes of UTF-8 per "é".
    with pytest.raises(fencelock.InvalidArgumentError, match="leader value"):
        client.campaign(resource, ttl=5, value="é" * (MAX_LEADER_VALUE // 2 + 1))
    assert r1.exists(lock_key(resource)) == 0, "a refused campaign took the election"

    for name in ["", "n" * (MAX_RESOURCE_LEN + 1)]:
        with pytest.raises(fencelock.InvalidArgumentError):
            client.campaign(name, ttl=5)
        with pytest.raises(fencelock.InvalidArgumentError):
            client.observe(name)
    for ttl in [0, -1, math.nan, math.inf, True]:
        with pytest.raises(fencelock.InvalidArgumentError):
            client.campaign(resource, ttl=ttl)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.campaign(resource, ttl=5, wait=-1)
    with pytest.raises(TypeError, match="name must be str"):
        client.campaign(5, ttl=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="value must be bytes or str"):
        client.campaign(resource, ttl=5, value=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.campaign(resource, ttl="5")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.observe(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.campaign(resource, ttl=5, fair=True)  # type: ignore[call-arg]
    with pytest.raises(fencelock.InvalidArgumentError):
        Leader(b"a", -1)
    with pytest.raises(TypeError):
        Leader(1, 1)  # type: ignore[arg-type]
    with client.observe(resource) as observation:
        with pytest.raises(fencelock.InvalidArgumentError):
            observation.next(timeout=-1)

    client.close()
    with pytest.raises(fencelock.ClosedError):
        client.campaign(resource, ttl=5)
    with pytest.raises(fencelock.ClosedError):
        client.observe(resource)


def test_async_campaign_resign_and_observe(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    async def main() -> None:
        client, other = AsyncClient(url), AsyncClient(url)
        observation = client.observe(resource)
        while observers(r1, resource) < 1:
            await asyncio.sleep(0.01)

        first = await client.campaign(resource, ttl=5, value="a")
        assert isinstance(first, AsyncLeadership) and first.is_leader()
        assert (first.name, first.value) == (resource, b"a")
        async for seen in observation:
            assert seen == Leader(b"a", first.epoch)
            break

        candidate = asyncio.ensure_future(other.campaign(resource, ttl=5, value=b"b"))
        while in_line(r1, resource) < 1:
            await asyncio.sleep(0.01)
        assert not candidate.done()
        await first.resign()
        second = await asyncio.wait_for(candidate, 1.0)
        assert second.epoch > first.epoch and second.value == b"b"
        assert await observation.next(timeout=1.0) == Leader(b"b", second.epoch)
        with pytest.raises(fencelock.NotHeldError):
            await first.resign()

        async with second:
            assert r1.exists(lock_key(resource)) == 1
        assert r1.exists(lock_key(resource)) == 0 and second.status == "released"

        with pytest.raises(fencelock.InvalidArgumentError, match="leader value"):
            await client.campaign(resource, ttl=5, value=b"x" * (MAX_LEADER_VALUE + 1))
        with pytest.raises(fencelock.InvalidArgumentError):
            client.campaign(resource, ttl=0)
        async with observation:
            pass
        assert observation.closed

    run(main)


def test_async_lost_signal_is_awaitable(url: str, resource: str, r1: "redis.Redis[str]") -> None:
    async def main() -> None:
        leader = await AsyncClient(url).campaign(resource, ttl=0.3)
        assert await leader.lost.wait_async(0.01) is False
        r1.delete(lock_key(resource))
        assert await asyncio.wait_for(leader.lost, 5) is True
        assert leader.lost.reason == "deleted" and not leader.is_leader()

    run(main)


def test_async_observation_cancelled_cleanly(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    async def main() -> None:
        client = AsyncClient(url)
        observation = client.observe(resource)
        while observers(r1, resource) < 1:
            await asyncio.sleep(0.01)
        seen: List[Leader] = []

        async def consume() -> None:
            async for leader in observation:
                seen.append(leader)

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen == []

        # The cancelled wait lost nothing: the observation carries on.
        leader = await client.campaign(resource, ttl=5, value="c")
        assert await observation.next(timeout=1.0) == Leader(b"c", leader.epoch)

        # close() ends a waiting `async for` (normally, not by cancellation).
        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.1)
        observation.close()
        await asyncio.wait_for(task, 1.0)
        assert seen == [] and observation.closed
        assert await observation.next() is None
        while observers(r1, resource) > 0:
            await asyncio.sleep(0.01)
        await leader.resign()

    run(main)


def test_cancelled_async_campaign_takes_nothing(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    async def main() -> None:
        holder = await AsyncClient(url).campaign(resource, ttl=5)
        candidate = asyncio.ensure_future(AsyncClient(url).campaign(resource, ttl=5))
        while in_line(r1, resource) < 1:
            await asyncio.sleep(0.01)
        candidate.cancel()
        with pytest.raises(asyncio.CancelledError):
            await candidate
        await holder.resign()
        await asyncio.sleep(0.3)
        assert r1.exists(lock_key(resource)) == 0, "the cancelled candidate was elected"

    run(main)


def test_redlock_campaign_over_three_nodes(urls5: List[str], resource: str) -> None:
    urls = urls5[:3]
    client, other = Client(urls), Client(urls)
    assert client.quorum == 2
    nodes = [redis.Redis.from_url(u, decode_responses=True) for u in urls]
    try:
        with client.observe(resource) as observation:
            leader = client.campaign(resource, ttl=5, value="redlock")
            assert all(node.exists(lock_key(resource)) == 1 for node in nodes)
            assert observation.next(timeout=1.0) == Leader(b"redlock", leader.epoch)
            with pytest.raises(fencelock.LockTimeoutError):
                other.campaign(resource, ttl=5, wait=0.2)
            leader.resign()
            successor = other.campaign(resource, ttl=5, wait=1, value="next")
            assert successor.epoch > leader.epoch
            assert observation.next(timeout=1.0) == Leader(b"next", successor.epoch)
            successor.resign()
        # A resign returns once a majority answered; settle() waits for the rest.
        assert fencelock.settle(10)
        assert all(node.exists(lock_key(resource)) == 0 for node in nodes)
    finally:
        for node in nodes:
            node.close()

"""Acquire+release cycles: fencelock beside redis-py's locks and pottery's
Redlock, on the same redis-server nodes, in one run.

    python bindings/python/bench/bench.py [--seconds 2] [--threads 32]

For each contender: the p50/p99 latency of one uncontended cycle (one
caller), and the throughput of 32 threads (sync) or 32 tasks (asyncio),
each on its own resource. "core" is the Rust core alone (no Python in the
loop), the ceiling for the Python front. Prints ratios, not pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import fencelock
import redis
import redis.asyncio
from fencelock._native import _bench_core
from release_build import require_release_build

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from redis_nodes import RedisNodes  # noqa: E402

Row = Dict[str, Any]


def percentile(samples: List[float], q: float) -> float:
    samples = sorted(samples)
    return samples[min(len(samples) - 1, int(q * len(samples)))]


def latency_sync(
    cycle: Callable[[str], None], seconds: float, max_n: int = 20000
) -> Tuple[float, float]:
    name = f"bench:lat:{uuid.uuid4().hex[:8]}"
    for _ in range(50):  # warm up connections and caches
        cycle(name)
    samples: List[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and len(samples) < max_n:
        t0 = time.perf_counter()
        cycle(name)
        samples.append(time.perf_counter() - t0)
    return percentile(samples, 0.5), percentile(samples, 0.99)


def throughput_sync(cycle: Callable[[str], None], seconds: float, threads: int) -> float:
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    stop = threading.Event()
    errors: List[BaseException] = []

    def worker(i: int) -> None:
        name = f"bench:thr:{uuid.uuid4().hex[:8]}:{i}"
        cycle(name)
        start.wait()
        try:
            while not stop.is_set():
                cycle(name)
                counts[i] += 1
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return sum(counts) / elapsed


async def latency_async(
    cycle: Callable[[str], Awaitable[None]], seconds: float
) -> Tuple[float, float]:
    name = f"bench:alat:{uuid.uuid4().hex[:8]}"
    for _ in range(50):
        await cycle(name)
    samples: List[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and len(samples) < 20000:
        t0 = time.perf_counter()
        await cycle(name)
        samples.append(time.perf_counter() - t0)
    return percentile(samples, 0.5), percentile(samples, 0.99)


async def throughput_async(
    cycle: Callable[[str], Awaitable[None]], seconds: float, tasks: int
) -> float:
    counts = [0] * tasks
    stop = False

    async def worker(i: int) -> None:
        name = f"bench:athr:{uuid.uuid4().hex[:8]}:{i}"
        while not stop:
            await cycle(name)
            counts[i] += 1

    for i in range(tasks):  # warm up
        await cycle(f"bench:warm:{i}")
    t0 = time.perf_counter()
    running = [asyncio.ensure_future(worker(i)) for i in range(tasks)]
    await asyncio.sleep(seconds)
    stop = True
    await asyncio.gather(*running)
    return sum(counts) / (time.perf_counter() - t0)


def fencelock_sync(urls: List[str]) -> Callable[[str], None]:
    client = fencelock.Client(urls)

    def cycle(name: str) -> None:
        client.acquire(name, ttl=10, wait=0).release()

    return cycle


def fencelock_async(urls: List[str]) -> Callable[[str], Awaitable[None]]:
    client = fencelock.AsyncClient(urls)

    async def cycle(name: str) -> None:
        lock = await client.acquire(name, ttl=10, wait=0)
        await lock.release()

    return cycle


def redis_py_sync(url: str) -> Callable[[str], None]:
    r = redis.Redis.from_url(url)

    def cycle(name: str) -> None:
        lock = r.lock(name, timeout=10)
        if not lock.acquire(blocking=False):
            raise RuntimeError("not acquired")
        lock.release()

    return cycle


def redis_py_async(url: str) -> Callable[[str], Awaitable[None]]:
    r = redis.asyncio.Redis.from_url(url)

    async def cycle(name: str) -> None:
        lock = r.lock(name, timeout=10)
        if not await lock.acquire(blocking=False):
            raise RuntimeError("not acquired")
        await lock.release()

    return cycle


def pottery_sync(urls: List[str]) -> Callable[[str], None]:
    from pottery import Redlock

    masters = {redis.Redis.from_url(u) for u in urls}

    def cycle(name: str) -> None:
        lock = Redlock(key=name, masters=masters, auto_release_time=10)
        if not lock.acquire(blocking=False):
            raise RuntimeError("not acquired")
        lock.release()

    return cycle


def core_throughput(urls: List[str], seconds: float, tasks: int) -> Tuple[float, float]:
    """(throughput with `tasks` tasks, mean cycle latency of one task), no Python in the loop."""
    client = fencelock.Client(urls)
    prefix = f"bench:core:{uuid.uuid4().hex[:8]}"
    probe = 2000
    elapsed = _bench_core(client, prefix, probe, tasks)
    n = max(probe, int(probe * seconds / max(elapsed, 1e-6)))
    thr = n / _bench_core(client, prefix, n, tasks)
    one = _bench_core(client, prefix + ":1", 2000, 1) / 2000
    return thr, one


def run_async(
    factory: Callable[[], Callable[[str], Awaitable[None]]], seconds: float, tasks: int
) -> Tuple[Tuple[float, float], float]:
    """Latency and throughput in one event loop (asyncio clients are bound to their loop)."""

    async def both() -> Tuple[Tuple[float, float], float]:
        cycle = factory()
        return await latency_async(cycle, seconds), await throughput_async(cycle, seconds, tasks)

    return asyncio.run(both())


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    ap.add_argument("--threads", type=int, default=32, help="threads (sync) and tasks (asyncio)")
    args = ap.parse_args(argv)
    require_release_build()
    s, n = args.seconds, args.threads
    rows: List[Row] = []

    def add(name: str, nodes: int, lat: Optional[Tuple[float, float]], thr: float) -> None:
        row = {
            "name": name,
            "nodes": nodes,
            "p50": lat and lat[0],
            "p99": lat and lat[1],
            "thr": thr,
        }
        rows.append(row)
        p50 = f"{row['p50'] * 1e6:9.0f}" if row["p50"] else "        -"
        p99 = f"{row['p99'] * 1e6:9.0f}" if row["p99"] else "        -"
        print(f"{name:34} {nodes:5} {p50} {p99} {thr:12.0f}", flush=True)

    print(f"{'contender':34} {'nodes':>5} {'p50 µs':>9} {'p99 µs':>9} {'cycles/s':>12}")
    print(f"{'':34} {'':5} {'(1 caller)':>19} {'(' + str(n) + ' callers)':>12}")
    with RedisNodes(5) as cluster:
        one, five = cluster.urls[:1], cluster.urls
        for label, urls in (("1 node", one), ("5 nodes", five)):
            k = len(urls)
            c = fencelock_sync(urls)
            add("fencelock Client (sync)", k, latency_sync(c, s), throughput_sync(c, s, n))
            add(
                "fencelock AsyncClient (asyncio)",
                k,
                *run_async(lambda: fencelock_async(urls), s, n),
            )
            thr, mean = core_throughput(urls, s, n)
            add("Rust core alone (tokio tasks)", k, (mean, mean), thr)
            if k == 1:
                rc = redis_py_sync(urls[0])
                add("redis-py Lock (sync)", k, latency_sync(rc, s), throughput_sync(rc, s, n))
                add("redis.asyncio Lock", k, *run_async(lambda: redis_py_async(urls[0]), s, n))
            pc = pottery_sync(urls)
            add(
                "pottery Redlock (sync)",
                k,
                latency_sync(pc, s, max_n=2000),
                throughput_sync(pc, s, n),
            )

    def get(name: str, nodes: int) -> Row:
        return next(r for r in rows if r["name"].startswith(name) and r["nodes"] == nodes)

    fl1, fla1 = get("fencelock Client", 1), get("fencelock AsyncClient", 1)
    fl5 = get("fencelock Client", 5)
    rp, rpa = get("redis-py Lock", 1), get("redis.asyncio", 1)
    po1, po5 = get("pottery", 1), get("pottery", 5)
    core1 = get("Rust core", 1)
    print()
    print("ratios (higher is better for fencelock; targets from issue #4 in brackets):")
    print(
        f"  sync throughput, {n} threads, 1 node:   {fl1['thr'] / rp['thr']:6.1f}x redis-py Lock   [>= 5x]"
    )
    print(
        f"  asyncio throughput, {n} tasks, 1 node:  {fla1['thr'] / rpa['thr']:6.1f}x redis.asyncio Lock [>= 3x]"
    )
    print(
        f"  sync throughput, {n} threads, 5 nodes:  {fl5['thr'] / po5['thr']:6.1f}x pottery Redlock [>= 20x]"
    )
    print(
        f"  sync throughput, {n} threads, 1 node:   {fl1['thr'] / po1['thr']:6.1f}x pottery Redlock"
    )
    print(
        f"  p50 latency, 1 node:                    {rp['p50'] / fl1['p50']:6.2f}x lower than redis-py Lock [> 1x]"
    )
    print(f"  sync throughput vs the Rust core alone: {fl1['thr'] / core1['thr']:6.2f}x (1 node)")


if __name__ == "__main__":
    main()

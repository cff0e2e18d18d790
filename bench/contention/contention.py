"""One lock, many workers: how fairly and how fast each library hands it over.

    target/python-venv/bin/python bench/contention/contention.py \
        [--seconds 5] [--workers 8 32] [--holds 0 1] [--nodes 1 5] [--only NAME ...] \
        [--permits K] [--by-command] [--phases] [--server PATH]

With `--permits K` the resource is a counting semaphore of K permits instead
(fencelock's from Python and Node, redis-semaphore's `Semaphore` on one node
and `RedlockSemaphore` on several), and each row also prints the most
holders seen at once, which must never exceed K (issue 18's targets).

(The Node libraries need `cd bindings/node/bench && npm install` first.)

W worker processes, each with its own client, loop on ONE resource:
acquire -> hold (0 or 1 ms) -> release, for `--seconds`. Every library runs
in the same run against the same redis-server nodes (started by the test
harness on free loopback ports), one after another. Per row:

- grants/s;
- handoff: from a release to the next grant *of another worker*, p50/p99;
- releaser re-takes: how often the worker that released took the lock next;
- longest wait: the longest time one acquire call waited (a call still
  waiting when the run ends counts with the time it had waited);
- min/max grants per worker and Jain's fairness index over them
  ((sum x)^2 / (n * sum x^2): 1.0 is perfectly even, 1/n is one worker only);
- client CPU per grant (every worker process, user + system);
- Redis commands per grant (INFO commandstats of every node, commands run
  inside scripts included).

With `--by-command` each row also prints its commands per grant by name;
with `--phases`, where the time between grants goes: the gaps from a release
to the next grant, split into re-takes (the same worker: its release and its
next acquire) and hand-offs, and the nodes' CPU per grant (INFO cpu). With
several nodes on few cores, a quorum's replies wait for each other's CPU, so
the Redis CPU a grant costs shows up in its latency.

`--server PATH` runs the nodes with another program than redis-server that
takes its arguments, e.g. the valkey-server that scripts/valkey-server.sh
builds: on a server with `SET … IFEQ` fencelock's re-takes run no script
(docs/protocol.md §3.18).

This is a report, not a test: the targets of issue 17 are printed beside the
fencelock rows as PASS/MISS. Clocks: CLOCK_MONOTONIC, which every process
of the machine shares, so grants of different workers can be ordered.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import multiprocessing
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

BINDINGS_PYTHON = Path(__file__).resolve().parents[2] / "bindings" / "python"
sys.path[:0] = [str(BINDINGS_PYTHON / "tests"), str(BINDINGS_PYTHON / "bench")]
from redis_nodes import RedisNodes  # noqa: E402
from release_build import require_release_build  # noqa: E402

# An acquire call never waits longer than this; a run ends before.
WAIT_CAP = 60.0
TTL = 10.0
# --permits, passed to every worker (Node workers by the environment).
PERMITS = int(os.environ.get("FENCELOCK_BENCH_PERMITS", "0"))

# (t_request, t_grant, t_release); t_grant is None for a call still waiting at the end.
Sample = tuple[float, float | None, float | None]
Acquire = Callable[[float], Callable[[], None] | None]


# ---------------------------------------------------------------- contenders
#
# Each contender is built inside its worker process from the node URLs and
# the resource name, and returns `acquire(timeout)`: a release function, or
# None when the wait timed out.


def fencelock_py(retry: float | None, fair: bool = False) -> Callable[[list[str], str], Acquire]:
    def make(urls: list[str], resource: str) -> Acquire:
        import fencelock

        client = fencelock.Client(urls, retry=None if retry is None else (retry, retry))
        # `fair` only when asked for, so that a build from before the fair
        # mode runs the default row too (to compare with an older commit).
        options = {"fair": True} if fair else {}

        def acquire(timeout: float) -> Callable[[], None] | None:
            try:
                lock = client.acquire(resource, ttl=TTL, wait=timeout, **options)
            except fencelock.LockTimeoutError:
                return None
            return lock.release

        return acquire

    return make


def fencelock_semaphore_py(urls: list[str], resource: str) -> Acquire:
    import fencelock

    semaphore = fencelock.Client(urls).semaphore(resource, PERMITS)

    def acquire(timeout: float) -> Callable[[], None] | None:
        try:
            permit = semaphore.acquire(ttl=TTL, wait=timeout)
        except fencelock.LockTimeoutError:
            return None
        return permit.release

    return acquire


def redis_py(sleep: float) -> Callable[[list[str], str], Acquire]:
    def make(urls: list[str], resource: str) -> Acquire:
        r = redis.Redis.from_url(urls[0])

        def acquire(timeout: float) -> Callable[[], None] | None:
            lock = r.lock(resource, timeout=TTL, sleep=sleep, blocking_timeout=timeout)
            return lock.release if lock.acquire() else None

        return acquire

    return make


def python_redis_lock(urls: list[str], resource: str) -> Acquire:
    import redis_lock

    r = redis.Redis.from_url(urls[0])

    def acquire(timeout: float) -> Callable[[], None] | None:
        lock = redis_lock.Lock(r, resource, expire=int(TTL))
        # Its timeout is whole seconds at least 1 (a BLPOP timeout).
        return lock.release if lock.acquire(timeout=max(1, int(timeout))) else None

    return acquire


def pottery_redlock(retry_delay: float | None) -> Callable[[list[str], str], Acquire]:
    def make(urls: list[str], resource: str) -> Acquire:
        from pottery import Redlock

        masters = {redis.Redis.from_url(url) for url in urls}
        kind = Redlock
        if retry_delay is not None:
            # Its only retry setting is a class variable.
            kind = type("FastRetryRedlock", (Redlock,), {"_RETRY_DELAY": retry_delay})

        def acquire(timeout: float) -> Callable[[], None] | None:
            lock = kind(key=resource, masters=masters, auto_release_time=TTL)
            return lock.release if lock.acquire(timeout=timeout) else None

        return acquire

    return make


@dataclass(frozen=True)
class Contender:
    name: str
    # Builds the acquire function in a Python worker; None for a Node
    # contender, run by bindings/node/bench/contention-worker.js.
    make: Callable[[list[str], str], Acquire] | None
    quorum: bool  # False: single-node only, skipped at 5 nodes
    ours: bool = False
    fair: bool = False  # judged by the fair mode's targets
    semaphore: bool = False  # takes one of --permits permits


CONTENDERS = [
    Contender("fencelock default", fencelock_py(None), True, ours=True),
    Contender("fencelock 5 ms retry", fencelock_py(0.005), True, ours=True),
    Contender("fencelock fair", fencelock_py(None, fair=True), True, ours=True, fair=True),
    Contender("redis-py Lock", redis_py(0.1), False),
    Contender("redis-py Lock 5 ms", redis_py(0.005), False),
    Contender("python-redis-lock", python_redis_lock, False),
    Contender("pottery Redlock", pottery_redlock(None), True),
    Contender("pottery Redlock 5 ms", pottery_redlock(0.005), True),
    Contender("fencelock node default", None, True, ours=True),
    Contender("fencelock node fair", None, True, ours=True, fair=True),
    Contender("node-redlock", None, True),
    Contender("node-redlock 5 ms", None, True),
    Contender("redis-semaphore", None, True),
    Contender("redis-semaphore 5 ms", None, True),
    Contender("fencelock semaphore", fencelock_semaphore_py, True, ours=True, semaphore=True),
    Contender("fencelock node semaphore", None, True, ours=True, semaphore=True),
    Contender("redis-semaphore Semaphore", None, True, semaphore=True),
    Contender("redis-semaphore Semaphore 5 ms", None, True, semaphore=True),
]

NODE_WORKER = (
    Path(__file__).resolve().parents[2] / "bindings" / "node" / "bench" / "contention-worker.js"
)


# ---------------------------------------------------------------- workers


@dataclass(frozen=True)
class Row:
    """One row of the report: who contends, on which nodes and lock, how."""

    contender: Contender
    urls: list[str]
    resource: str
    workers: int
    hold: float  # seconds
    start_at: float  # CLOCK_MONOTONIC seconds
    end_at: float


# What one worker reports: its samples and its CPU seconds.
Report = tuple[list[Sample], float]


def worker(row: Row, out: Any) -> None:
    """One Python worker's loop; sends its report through `out`."""
    assert row.contender.make is not None
    acquire = row.contender.make(row.urls, row.resource)
    samples: list[Sample] = []
    while time.monotonic() < row.start_at:
        time.sleep(0.001)
    cpu_start = time.process_time()
    while True:
        asked = time.monotonic()
        if asked >= row.end_at:
            break
        release = acquire(min(WAIT_CAP, row.end_at - asked))
        granted = time.monotonic()
        if release is None:
            samples.append((asked, None, None))
            continue
        if row.hold:
            time.sleep(row.hold)
        released = time.monotonic()
        release()
        samples.append((asked, granted, released))
    out.send((samples, time.process_time() - cpu_start))
    out.close()


def run_row(
    contender: Contender, urls: list[str], workers: int, hold: float, seconds: float
) -> tuple[list[list[Sample]], float, float]:
    """Runs one row; returns each worker's samples, their CPU seconds, and when it ended."""
    # Processes take a while to start and connect: everyone begins together.
    start_at = time.monotonic() + 1.0 + workers * 0.05
    row = Row(
        contender,
        urls,
        f"contention-{uuid.uuid4().hex[:8]}",
        workers,
        hold,
        start_at,
        start_at + seconds,
    )
    reports = python_workers(row) if contender.make else node_workers(row)
    return (
        [samples for samples, _ in reports],
        sum(cpu for _, cpu in reports),
        row.end_at,
    )


def python_workers(row: Row) -> list[Report]:
    ctx = multiprocessing.get_context("fork")
    pipes, procs = [], []
    for _ in range(row.workers):
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=worker, args=(row, send))
        proc.start()
        send.close()
        pipes.append(receive)
        procs.append(proc)
    reports = [pipe.recv() for pipe in pipes]
    for proc in procs:
        proc.join()
    return reports


def node_workers(row: Row) -> list[Report]:
    args = [row.contender.name, str(row.hold), repr(row.start_at), repr(row.end_at)]
    command = ["node", str(NODE_WORKER), *args, row.resource, *row.urls]
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, cwd=NODE_WORKER.parent)
        for _ in range(row.workers)
    ]
    reports = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{row.contender.name}: a Node worker exited with {proc.returncode}")
        report = json.loads(out)
        reports.append(([tuple(s) for s in report["samples"]], float(report["cpu"])))
    return reports


# ---------------------------------------------------------------- metrics


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def jain(counts: Sequence[int]) -> float:
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return total * total / (len(counts) * squares) if squares else 0.0


@dataclass
class Result:
    grants_per_s: float
    handoff_p50_ms: float
    handoff_p99_ms: float
    retakes: float
    longest_wait_s: float
    min_grants: int
    max_grants: int
    jain: float
    cpu_us_per_grant: float
    commands_per_grant: float
    most_holders: int


def summarize(
    per_worker: list[list[Sample]],
    cpu: float,
    end_at: float,
    seconds: float,
    commands: int,
) -> Result:
    grants = held(per_worker)
    retake_gaps, handoff_gaps = gaps(grants)
    handoffs = [gap * 1000 for gap in handoff_gaps]
    waits = [
        (granted if granted is not None else end_at) - asked
        for samples in per_worker
        for (asked, granted, _) in samples
    ]
    counts = [sum(1 for s in samples if s[1] is not None) for samples in per_worker]
    # The most workers between their grant and their release at one instant
    # (a release at the instant of another's grant counts first).
    edges = sorted(e for g, r, _ in grants for e in ((g, 1), (r, -1)))
    inside = list(itertools.accumulate(step for _, step in edges))
    total = max(1, len(grants))
    return Result(
        grants_per_s=len(grants) / seconds,
        handoff_p50_ms=percentile(handoffs, 0.5),
        handoff_p99_ms=percentile(handoffs, 0.99),
        retakes=len(retake_gaps) / max(1, len(grants) - 1),
        longest_wait_s=max(waits, default=0.0),
        min_grants=min(counts),
        max_grants=max(counts),
        jain=jain(counts),
        cpu_us_per_grant=cpu * 1e6 / total,
        commands_per_grant=commands / total,
        most_holders=max(inside, default=0),
    )


def held(per_worker: list[list[Sample]]) -> list[tuple[float, float, int]]:
    """Every grant that was released, as (granted, released, worker), in order."""
    return sorted(
        (granted, released, w)
        for w, samples in enumerate(per_worker)
        for (_, granted, released) in samples
        if granted is not None and released is not None
    )


def gaps(grants: list[tuple[float, float, int]]) -> tuple[list[float], list[float]]:
    """The seconds from each release to the next grant: re-takes (the same
    worker took it next), then hand-offs (another worker did)."""
    retakes, handoffs = [], []
    for (_, released, holder), (granted, _, taker) in itertools.pairwise(grants):
        (retakes if taker == holder else handoffs).append(granted - released)
    return retakes, handoffs


def phases(per_worker: list[list[Sample]], seconds: float, redis_cpu: float) -> str:
    """Where the time between grants goes (`--phases`)."""
    grants = held(per_worker)
    parts = [f"Redis CPU {redis_cpu * 1e6 / max(1, len(grants)):.0f} µs per grant"]
    for name, spent in zip(("re-takes", "hand-offs"), gaps(grants)):
        if spent:
            parts.append(
                f"{name} {len(spent)}: gap p50 {percentile(spent, 0.5) * 1000:.2f} ms, "
                f"{sum(spent) / seconds:.0%} of the run"
            )
    return "    between grants: " + "; ".join(parts)


def redis_cpu_seconds(urls: list[str]) -> float:
    """The CPU the nodes used so far, user + system (INFO cpu)."""
    total = 0.0
    for url in urls:
        cpu = redis.Redis.from_url(url).info("cpu")
        total += float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
    return total


def commands_run(urls: list[str]) -> collections.Counter[str]:
    """Every command the nodes ran so far, by name (scripts' inner commands included)."""
    total: collections.Counter[str] = collections.Counter()
    for url in urls:
        stats = redis.Redis.from_url(url).info("commandstats")
        for name, entry in stats.items():
            total[name.removeprefix("cmdstat_")] += int(entry["calls"])
    return total


def breakdown(commands: collections.Counter[str], grants: float) -> str:
    """The commands per grant by name, most first (`--by-command`)."""
    parts = [f"{name} {calls / grants:.2f}" for name, calls in commands.most_common() if calls]
    return "    per grant: " + ", ".join(parts)


# ---------------------------------------------------------------- report

HEADER = (
    f"{'library':<22} {'grants/s':>8} {'handoff p50':>11} {'p99 ms':>7} {'re-takes':>8} "
    f"{'longest':>8} {'min/max':>9} {'Jain':>5} {'CPU µs':>7} {'cmds':>6} {'most':>4}"
)


def line(name: str, row: Result) -> str:
    return (
        f"{name:<22} {row.grants_per_s:>8.0f} {row.handoff_p50_ms:>11.2f} "
        f"{row.handoff_p99_ms:>7.2f} {row.retakes:>7.0%} {row.longest_wait_s:>7.2f}s "
        f"{f'{row.min_grants}/{row.max_grants}':>9} {row.jain:>5.2f} "
        f"{row.cpu_us_per_grant:>7.0f} {row.commands_per_grant:>6.1f} {row.most_holders:>4}"
    )


def targets(row: Result, nodes: int, workers: int, hold_ms: float, fair: bool) -> list[str]:
    """Issue 17's targets (W=32, hold 1 ms): the default mode's, or the fair mode's."""
    handoff_target = 1.0 if nodes == 1 else 2.0
    checks = [
        ("no worker starved", row.min_grants > 0),
        (f"handoff p50 <= {handoff_target:g} ms", row.handoff_p50_ms <= handoff_target),
    ]
    if fair:
        # Everyone ahead in line holds once, each hand-off at worst the p99.
        longest = workers * (hold_ms + row.handoff_p99_ms) * 1.5 / 1000
        checks += [
            ("Jain >= 0.99", row.jain >= 0.99),
            (f"longest wait <= {longest * 1000:.0f} ms", row.longest_wait_s <= longest),
        ]
    else:
        checks.append(("Jain >= 0.9", row.jain >= 0.9))
    return [f"{'PASS' if ok else 'MISS'} {what}" for what, ok in checks]


def semaphore_targets(row: Result, peer: Result | None, nodes: int, permits: int) -> list[str]:
    """Issue 18's targets beside redis-semaphore's Semaphore (1 node) or
    RedlockSemaphore (more), measured in the same run."""
    checks = [
        (f"most holders {row.most_holders} <= {permits}", row.most_holders <= permits),
        ("no worker starved", row.min_grants > 0),
    ]
    if peer is not None and peer.grants_per_s > 0:
        want = 1.5 if nodes == 1 else 1.0
        ratio = row.grants_per_s / peer.grants_per_s
        checks.append((f"{ratio:.2f}x redis-semaphore (target {want:g}x)", ratio >= want))
    return [f"{'PASS' if ok else 'MISS'} {what}" for what, ok in checks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--holds", type=float, nargs="+", default=[0, 1], help="ms")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--only", nargs="+", help="contender names (substrings)")
    parser.add_argument("--permits", type=int, default=0, help="a semaphore of K permits")
    parser.add_argument(
        "--by-command", action="store_true", help="print each row's commands per grant by name"
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="print where each row's time between grants goes, and the nodes' CPU per grant",
    )
    parser.add_argument("--server", help="the nodes' program (default: redis-server)")
    args = parser.parse_args()
    require_release_build()
    global PERMITS
    PERMITS = args.permits
    os.environ["FENCELOCK_BENCH_PERMITS"] = str(args.permits)

    chosen = [
        c
        for c in CONTENDERS
        if c.semaphore == (args.permits > 0)
        and (not args.only or any(o.lower() in c.name.lower() for o in args.only))
    ]
    what = f"one semaphore of {args.permits} permits" if args.permits else "one lock"
    server = args.server or "redis-server"
    print(
        f"{what}, W workers (processes), {args.seconds:g} s per row, {os.cpu_count()} cores, {server}"
    )
    for node_count in args.nodes:
        with RedisNodes(node_count, server=args.server) as nodes:
            for workers in args.workers:
                for hold_ms in args.holds:
                    print(f"\n{node_count} node(s), W={workers}, hold {hold_ms:g} ms")
                    print(HEADER)
                    results: dict[str, Result] = {}
                    # The peer first, so our rows can be judged against it.
                    for contender in sorted(chosen, key=lambda c: c.ours):
                        if node_count > 1 and not contender.quorum:
                            print(f"{contender.name:<22} (single-node only)")
                            continue
                        before = commands_run(nodes.urls)
                        redis_before = redis_cpu_seconds(nodes.urls)
                        per_worker, cpu, end_at = run_row(
                            contender, nodes.urls, workers, hold_ms / 1000, args.seconds
                        )
                        redis_cpu = redis_cpu_seconds(nodes.urls) - redis_before
                        commands = commands_run(nodes.urls)
                        commands.subtract(before)
                        row = summarize(per_worker, cpu, end_at, args.seconds, commands.total())
                        results[contender.name] = row
                        extra = ""
                        if contender.ours and contender.semaphore:
                            peer = results.get("redis-semaphore Semaphore")
                            extra = "  " + ", ".join(
                                semaphore_targets(row, peer, node_count, args.permits)
                            )
                        elif contender.ours and workers == 32 and hold_ms == 1:
                            extra = "  " + ", ".join(
                                targets(row, node_count, workers, hold_ms, contender.fair)
                            )
                        print(line(contender.name, row) + extra, flush=True)
                        if args.by_command and row.commands_per_grant:
                            grants = commands.total() / row.commands_per_grant
                            print(breakdown(commands, grants), flush=True)
                        if args.phases:
                            print(phases(per_worker, args.seconds, redis_cpu), flush=True)
    print(
        "\nhandoff: release -> next grant of another worker; re-takes: the releaser took it next;"
        "\nlongest: the longest single wait; CPU µs and cmds are per grant (cmds include those"
        "\nrun inside scripts)."
    )


if __name__ == "__main__":
    main()

"""A cron job that runs once across instances.

    python examples/python/cron_once.py [--nodes URL...]

Every instance (host, container, pod) runs the same schedule; the one that
takes the lock runs the job, the others skip it. With no arguments this
script starts three instances at once, as cron would on three hosts, and
checks that exactly one of them ran the job.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import fencelock
from _nodes import redis_nodes


def instance(nodes: list[str], name: str, period: str) -> int:
    """One instance's cron entry for one period (e.g. today's date).

    The lock keeps two instances from running at the same time; the
    "done" record, written with the fencing token, keeps a late instance
    from running the same period again after the first one finished.
    """
    client = fencelock.Client(nodes)
    lock = client.try_acquire(f"cron:nightly-report:{period}", ttl=30)
    if lock is None:
        print(f"{name}: SKIPPED (another instance holds the lock)")
        return 0
    with lock:
        if client.fenced_get(f"cron:done:{period}") is not None:
            print(f"{name}: SKIPPED (already done for {period})")
            return 0
        print(f"{name}: RAN the job with fencing token {lock.fencing_token}")
        time.sleep(0.5)  # the job; a real one passes the token to what it writes
        client.fenced_set(f"cron:done:{period}", name, lock.fence)
    return 0


def main() -> None:
    if "--instance" in sys.argv:
        i = sys.argv.index("--instance")
        name, period, nodes = (
            sys.argv[i + 1],
            sys.argv[i + 2],
            sys.argv[i + 3].split(","),
        )
        raise SystemExit(instance(nodes, name, period))
    run_id = uuid.uuid4().hex[:8]
    with redis_nodes(3) as nodes:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--instance",
                    f"host-{i}",
                    run_id,
                    ",".join(nodes),
                ],
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            for i in range(3)
        ]
        outputs = [p.communicate(timeout=60)[0] for p in procs]
        for out in outputs:
            print(out, end="")
        ran = sum("RAN the job" in out for out in outputs)
        assert all(p.returncode == 0 for p in procs)
        last = fencelock.Client(nodes).fenced_get(f"cron:done:{run_id}")
        print(
            f"instances that ran the job: {ran}; done record written by {last and last[0]}"
        )
        assert ran == 1, ran


if __name__ == "__main__":
    main()

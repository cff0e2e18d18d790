"""Where the examples find Redis: ``--nodes URL...``, ``$FENCELOCK_NODES``
(comma-separated), or local nodes started for the run (through the
workspace's ``redis-nodes`` program, built with cargo when missing)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def redis_nodes(count: int) -> Iterator[List[str]]:
    """Yields `count` node URLs; starts (and afterwards stops) local nodes if none are given."""
    if "--nodes" in sys.argv:
        yield sys.argv[sys.argv.index("--nodes") + 1 :]
        return
    if os.environ.get("FENCELOCK_NODES"):
        yield os.environ["FENCELOCK_NODES"].split(",")
        return
    binary = Path(
        os.environ.get("FENCELOCK_REDIS_NODES", REPO / "target/debug/redis-nodes")
    )
    if not binary.exists():
        subprocess.run(
            ["cargo", "build", "-q", "-p", "fencelock-harness", "--bin", "redis-nodes"],
            cwd=REPO,
            check=True,
        )
    proc = subprocess.Popen(
        [str(binary), "--nodes", str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield json.loads(proc.stdout.readline())["nodes"]
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # redis-nodes stops its own servers at end of input
        proc.wait()

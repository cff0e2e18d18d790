"""Real redis-server nodes for tests, benchmarks and examples.

Wraps the workspace's ``redis-nodes`` program (tests/harness): it starts N
redis-server processes on free loopback ports, prints their URLs, takes
``kill I`` / ``restart I`` / ``pause I`` / ``resume I`` on stdin and stops
every node (only its own) when stdin closes. With ``postgres=True`` it starts
one PostgreSQL server instead, which takes ``sql STATEMENT`` (:meth:`RedisNodes.sql`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, List, Optional

REPO = Path(__file__).resolve().parents[3]


def redis_nodes_binary() -> Path:
    """Where ``redis-nodes`` is: ``$FENCELOCK_REDIS_NODES`` or the workspace's debug build."""
    env = os.environ.get("FENCELOCK_REDIS_NODES")
    path = Path(env) if env else REPO / "target" / "debug" / "redis-nodes"
    if not path.exists():
        raise RuntimeError(
            f"{path} is missing; build it with `cargo build -p fencelock-harness --bin redis-nodes`"
        )
    return path


#: redis-nodes --postgres exits with this when PostgreSQL is not installed.
POSTGRES_MISSING = 77


class PostgresMissing(RuntimeError):
    """PostgreSQL is not installed: the one reason a PostgreSQL test skips."""


class RedisNodes:
    """N redis-server processes, stopped by :meth:`close` (or when this process dies).

    ``postgres=True``: one PostgreSQL server instead (``redis-nodes --postgres``).
    ``server``: another program than redis-server that takes its arguments
    (``redis-nodes --server``), such as a valkey-server.
    If it cannot start (PostgreSQL not installed), the :class:`RuntimeError`
    carries what redis-nodes said on stderr.
    """

    def __init__(
        self,
        count: int = 1,
        aof: bool = False,
        postgres: bool = False,
        server: Optional[str] = None,
    ) -> None:
        args = [str(redis_nodes_binary()), "--nodes", str(count)]
        if aof:
            args.append("--aof")
        if server:
            args += ["--server", server]
        if postgres:
            args = [str(redis_nodes_binary()), "--postgres"]
        self._proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # --postgres: kept to say why it did not start, then passed on.
            stderr=subprocess.PIPE if postgres else None,
            text=True,
            bufsize=1,
        )
        assert self._proc.stdout is not None
        first = self._proc.stdout.readline()
        if not first:
            self._proc.wait(timeout=10)
            said = self._proc.stderr.read().strip() if self._proc.stderr else ""
            error = PostgresMissing if self._proc.returncode == POSTGRES_MISSING else RuntimeError
            raise error(
                f"{' '.join(args[1:])}: redis-nodes exited with {self._proc.returncode} "
                f"before starting{': ' + said if said else ''}"
            )
        if self._proc.stderr is not None:
            threading.Thread(target=_pass_on, args=(self._proc.stderr,), daemon=True).start()
        self.urls: List[str] = json.loads(first)["nodes"]
        self._lock = threading.Lock()

    def command(self, line: str) -> str:
        """Sends one command (``kill 0``, ``pause 1``, ``call 0 DEL key``…); returns the reply."""
        with self._lock:
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
            reply = self._proc.stdout.readline().strip()
        if not reply.startswith("ok"):
            raise RuntimeError(f"redis-nodes: {line!r} -> {reply!r}")
        return reply[2:].strip()

    def sql(self, statement: str) -> str:
        """``--postgres`` only: runs one SQL statement as the superuser; what it printed."""
        return self.command(f"sql {statement}")

    def kill(self, i: int) -> None:
        self.command(f"kill {i}")

    def restart(self, i: int) -> None:
        self.command(f"restart {i}")

    def pause(self, i: int) -> None:
        self.command(f"pause {i}")

    def resume(self, i: int) -> None:
        self.command(f"resume {i}")

    def close(self, timeout: Optional[float] = 30) -> None:
        """Stops every node (closing stdin makes redis-nodes kill its own processes)."""
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> "RedisNodes":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _pass_on(stream: IO[str]) -> None:
    for line in stream:
        sys.stderr.write(line)


def lock_key(resource: str, prefix: str = "fencelock:") -> str:
    """The Redis key of a lock (docs/protocol.md §2.1)."""
    return f"{prefix}{{{resource}}}"

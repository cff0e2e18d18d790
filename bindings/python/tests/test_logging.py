"""The core's events in Python's logging (issue 21): records on the ``fencelock.*``
loggers at the mapped levels with their fields in ``extra``, the level read from the
``fencelock`` logger when a client is made, and never a password or a lock token in
any record (as core/tests/log_forward.rs checks for Rust)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterator, List

import fencelock
import pytest
import redis
from fencelock import AsyncClient, Client
from redis_nodes import RedisNodes, lock_key

PASSWORD = "pw-SECRET-4711"


class Capture(logging.Handler):
    """Keeps every record it handles."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: List[logging.LogRecord] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._guard:
            self.records.append(record)

    def snapshot(self) -> List[logging.LogRecord]:
        with self._guard:
            return list(self.records)

    def clear(self) -> None:
        with self._guard:
            self.records.clear()

    def wait_for(
        self, match: Callable[[logging.LogRecord], bool], timeout: float = 5.0
    ) -> logging.LogRecord:
        """The first record `match` accepts, waiting for delivery (it is asynchronous)."""
        deadline = time.monotonic() + timeout
        while True:
            for record in self.snapshot():
                if match(record):
                    return record
            if time.monotonic() > deadline:
                lines = "\n".join(
                    f"{r.name} {r.levelname} {r.getMessage()}" for r in self.snapshot()
                )
                raise AssertionError(f"no such record; got:\n{lines}")
            time.sleep(0.01)


def fields(record: logging.LogRecord) -> Dict[str, str]:
    value: Dict[str, str] = getattr(record, "fencelock_fields")
    return value


def settle_delivery() -> None:
    """Lets records already emitted reach the handlers."""
    time.sleep(0.3)


def assert_no_secret(records: List[logging.LogRecord], *secrets: str) -> None:
    assert records
    for record in records:
        texts = [
            record.getMessage(),
            record.name,
            str(getattr(record, "fencelock_fields")),
            str(getattr(record, "fencelock_target")),
            str(getattr(record, "fencelock_message")),
        ]
        for secret in secrets:
            for text in texts:
                assert secret not in text, f"a secret reached a record: {text!r}"


@pytest.fixture
def capture() -> Iterator[Capture]:
    """A handler on the ``fencelock`` logger; levels restored afterwards."""
    logger = logging.getLogger("fencelock")
    children = [
        child
        for name, child in logging.Logger.manager.loggerDict.items()
        if name.startswith("fencelock.") and isinstance(child, logging.Logger)
    ]
    saved = [(logger, logger.level)] + [(child, child.level) for child in children]
    handler = Capture()
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    for each, level in saved:
        each.setLevel(level)
    for name, each in logging.Logger.manager.loggerDict.items():
        if name.startswith("fencelock.") and isinstance(each, logging.Logger):
            if each not in children:
                each.setLevel(logging.NOTSET)
    fencelock.sync_log_level()


class AclNodes:
    """Three fresh nodes with an ACL user `app` whose password is PASSWORD."""

    def __init__(self, nodes: RedisNodes) -> None:
        self.nodes = nodes
        self.direct = [redis.Redis.from_url(url, decode_responses=True) for url in nodes.urls]
        for r in self.direct:
            r.execute_command("ACL", "SETUSER", "app", "on", f">{PASSWORD}", "~*", "&*", "+@all")
        self.urls = [url.replace("redis://", f"redis://app:{PASSWORD}@") for url in nodes.urls]

    def token(self, resource: str) -> str:
        value = self.direct[0].get(lock_key(resource))
        assert isinstance(value, str) and value
        return value

    def delete(self, resource: str, *on: int) -> None:
        for i in on:
            self.direct[i].delete(lock_key(resource))

    def close(self) -> None:
        for r in self.direct:
            r.close()


@pytest.fixture
def acl(nodes3: RedisNodes) -> Iterator[AclNodes]:
    nodes = AclNodes(nodes3)
    yield nodes
    nodes.close()


def test_events_reach_logging_with_their_fields_and_never_a_secret(
    capture: Capture, acl: AclNodes, resource: str
) -> None:
    logging.getLogger("fencelock").setLevel(fencelock.TRACE)
    acl.nodes.kill(2)
    unreachable = acl.nodes.urls[2].replace("redis://", "")
    with Client(acl.urls, node_timeout=2) as client:
        lock = client.acquire(resource, ttl=0.3)
        token = acl.token(resource)
        acquired = capture.wait_for(lambda r: getattr(r, "fencelock_message") == "lock acquired")
        assert acquired.levelno == logging.DEBUG and acquired.levelname == "DEBUG"
        assert acquired.name.startswith("fencelock.")
        assert getattr(acquired, "fencelock_target").replace("::", ".") == acquired.name
        assert fields(acquired)["resource"] == resource
        assert acquired.getMessage().startswith(f"lock acquired resource={resource}")
        # A renewal or two, at TRACE.
        renewed = capture.wait_for(lambda r: r.levelno == fencelock.TRACE)
        assert renewed.levelname == "TRACE"
        acl.delete(resource, 0, 1)
        assert lock.lost.wait(2)
        lost = capture.wait_for(lambda r: getattr(r, "fencelock_message") == "lock lost")
        assert lost.levelno == logging.WARNING and lost.name == "fencelock.lock_state"
        assert fields(lost)["resource"] == resource
        assert fields(lost)["reason"]
        assert lost.getMessage() == (
            f"lock lost resource={resource} reason={fields(lost)['reason']}"
        )
        capture.wait_for(lambda r: r.levelno == logging.WARNING and unreachable in r.getMessage())
        with pytest.raises(fencelock.FenceLockError):
            lock.release()
    settle_delivery()
    records = capture.snapshot()
    assert all(r.name == "fencelock" or r.name.startswith("fencelock.") for r in records)
    assert_no_secret(records, PASSWORD, token)


def test_the_level_is_read_from_the_logger_when_a_client_is_made(
    capture: Capture, acl: AclNodes, resource: str
) -> None:
    logger = logging.getLogger("fencelock")
    logger.setLevel(logging.DEBUG)
    with Client(acl.urls) as client:
        assert fencelock._native._log_level() == 4
        client.acquire(f"{resource}:a", ttl=5).release()
        capture.wait_for(lambda r: r.levelno == logging.DEBUG)
    settle_delivery()

    logger.setLevel(logging.WARNING)
    # Not yet: the level is read when a client is made.
    assert fencelock._native._log_level() == 4
    with Client(acl.urls) as client:
        assert fencelock._native._log_level() == 2
        capture.clear()
        lock = client.acquire(f"{resource}:b", ttl=0.5)
        token = acl.token(f"{resource}:b")
        acl.delete(f"{resource}:b", 0, 1, 2)
        assert lock.lost.wait(2)
        capture.wait_for(lambda r: getattr(r, "fencelock_message") == "lock lost")
        settle_delivery()
        records = capture.snapshot()
        assert all(r.levelno >= logging.WARNING for r in records), [r.getMessage() for r in records]
        assert_no_secret(records, PASSWORD, token)

    # A child logger set lower lowers the level forwarded at, for itself only.
    logging.getLogger("fencelock.acquire").setLevel(logging.DEBUG)
    with Client(acl.urls) as client:
        assert fencelock._native._log_level() == 4
        capture.clear()
        client.acquire(f"{resource}:c", ttl=5).release()
        capture.wait_for(lambda r: r.name == "fencelock.acquire" and r.levelno == logging.DEBUG)
        settle_delivery()
        assert all(
            r.levelno >= logging.WARNING
            for r in capture.snapshot()
            if r.name != "fencelock.acquire"
        )


def test_sync_log_level_follows_the_loggers(capture: Capture) -> None:
    logger = logging.getLogger("fencelock")
    for level, expected in [
        (logging.CRITICAL, None),
        (logging.ERROR, "error"),
        (logging.WARNING, "warn"),
        (logging.INFO, "info"),
        (logging.DEBUG, "debug"),
        (fencelock.TRACE, "trace"),
        (1, "trace"),
    ]:
        logger.setLevel(level)
        assert fencelock.sync_log_level() == expected, level
        assert fencelock._native._log_level() == (
            None
            if expected is None
            else {"error": 1, "warn": 2, "info": 3, "debug": 4, "trace": 5}[expected]
        )
    logging.disable(logging.CRITICAL)
    try:
        assert fencelock.sync_log_level() is None
    finally:
        logging.disable(logging.NOTSET)
    assert fencelock.sync_log_level() == "trace"
    assert logging.getLevelName(fencelock.TRACE) == "TRACE"


def test_bad_levels_are_refused() -> None:
    for bad in (0, 6):
        with pytest.raises(fencelock.InvalidArgumentError, match="1 \\(error\\) to 5 \\(trace\\)"):
            fencelock._native._set_log_level(bad)
    with pytest.raises(TypeError):
        fencelock._native._set_log_level("debug")


def test_an_asyncio_client_logs_too(capture: Capture, acl: AclNodes, resource: str) -> None:
    logging.getLogger("fencelock").setLevel(logging.WARNING)
    fencelock.sync_log_level()
    logging.getLogger("fencelock").setLevel(logging.DEBUG)

    async def scenario() -> str:
        # connect() reads the level as the constructor does.
        async with await AsyncClient.connect(acl.urls) as client:
            assert fencelock._native._log_level() == 4
            lock = await client.acquire(resource, ttl=0.5)
            token = acl.token(resource)
            acquired = capture.wait_for(
                lambda r: (
                    getattr(r, "fencelock_message") == "lock acquired"
                    and fields(r).get("resource") == resource
                )
            )
            assert acquired.levelno == logging.DEBUG
            acl.delete(resource, 0, 1, 2)
            assert await lock.lost.wait_async(2)
            lost = capture.wait_for(lambda r: getattr(r, "fencelock_message") == "lock lost")
            assert lost.levelno == logging.WARNING
            assert fields(lost)["resource"] == resource and fields(lost)["reason"]
        logging.getLogger("fencelock").setLevel(logging.ERROR)
        AsyncClient(acl.urls).close()
        assert fencelock._native._log_level() == 1
        return token

    token = asyncio.run(scenario())
    settle_delivery()
    assert_no_secret(capture.snapshot(), PASSWORD, token)


def test_an_exception_in_logging_is_unraisable_and_delivery_goes_on(
    capture: Capture, url: str, resource: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    unraisable: List[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    class Boom(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            if getattr(record, "fencelock_message", None) == "lock acquired":
                raise RuntimeError("a broken filter")
            return True

    logging.getLogger("fencelock").setLevel(logging.DEBUG)
    logger = logging.getLogger("fencelock.acquire")
    boom = Boom()
    logger.addFilter(boom)
    try:
        with Client(url) as client:
            client.acquire(resource, ttl=5).release()
            released = capture.wait_for(
                lambda r: getattr(r, "fencelock_message") == "lock released"
            )
            assert fields(released)["resource"] == resource
    finally:
        logger.removeFilter(boom)
    deadline = time.monotonic() + 5
    while not unraisable and time.monotonic() < deadline:
        time.sleep(0.01)
    assert unraisable, "the exception was not reported"
    assert isinstance(unraisable[0].exc_value, RuntimeError)


def run_python(script: str, timeout: float = 20) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout
    )


def test_the_interpreter_exits_while_records_are_delivered(url: str) -> None:
    # A slow handler keeps the delivery thread inside Python (and the queue full)
    # as the interpreter shuts down: it must exit cleanly, neither hanging nor crashing.
    script = f"""
import logging, time
import fencelock

class Slow(logging.Handler):
    def emit(self, record):
        time.sleep(0.01)

logging.getLogger("fencelock").addHandler(Slow())
logging.getLogger("fencelock").setLevel(logging.DEBUG)
client = fencelock.Client({url!r})
for i in range(200):
    client.acquire("exit-while-logging:%d" % i, ttl=5).release()
print("done", flush=True)
"""
    started = time.monotonic()
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
    assert time.monotonic() - started < 15


def test_an_application_that_configures_nothing_sees_warnings_on_stderr(url: str) -> None:
    # Python's last-resort handler prints WARNING and above when nothing is configured:
    # a lost lock is not silent by default (and debug records are not forwarded at all).
    script = f"""
import time, redis
import fencelock
client = fencelock.Client({url!r})
assert fencelock._native._log_level() == 2, fencelock._native._log_level()
lock = client.acquire("unconfigured:{time.time_ns()}", ttl=1)
redis.Redis.from_url({url!r}).delete("fencelock:{{" + lock.resource + "}}")
assert lock.lost.wait(3)
time.sleep(0.3)
"""
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    assert "lock lost resource=unconfigured:" in result.stderr
    assert "lock acquired" not in result.stderr


def test_a_forked_child_logs_through_its_own_delivery_thread(url: str) -> None:
    # fork() copies the queue to the core's delivery thread but not the thread:
    # the child's first record opens a queue and thread of its own.
    script = f"""
import logging, os, time
import fencelock

records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logger = logging.getLogger("fencelock")
logger.addHandler(Keep())
logger.setLevel(logging.DEBUG)

def cycle(resource):
    client = fencelock.Client({url!r})
    client.acquire(resource, ttl=5).release()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if any("lock acquired" in r and resource in r for r in records):
            return True
        time.sleep(0.01)
    return False

assert cycle("fork:parent:{time.time_ns()}"), records
# Fork while no record is being delivered: a fork in the middle of a
# delivery leaves the sink locked in the child (a limitation the core
# documents), which is not what this test is about.
quiet_since, seen = time.monotonic(), len(records)
while time.monotonic() - quiet_since < 0.3:
    time.sleep(0.02)
    if len(records) != seen:
        quiet_since, seen = time.monotonic(), len(records)
child = os.fork()
if child == 0:
    os._exit(0 if cycle("fork:child:{time.time_ns()}") else 3)
_, status = os.waitpid(child, 0)
raise SystemExit(os.waitstatus_to_exitcode(status))
"""
    result = run_python(script, timeout=30)
    assert result.returncode == 0, (
        f"the forked child saw no record of its own lock (exit {result.returncode}): "
        f"{result.stderr}"
    )

"""Ctrl-C interrupts a waiting acquire; a forked child gets a clear error."""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import fencelock
import pytest
import redis
from fencelock import Client
from redis_nodes import lock_key

CHILD = textwrap.dedent(
    """
    import sys, time
    from fencelock import Client
    client = Client(sys.argv[1])
    print("ready", flush=True)
    started = time.monotonic()
    try:
        client.acquire(sys.argv[2], ttl=5, wait=120)
    except KeyboardInterrupt:
        print("interrupted after %.3f s" % (time.monotonic() - started), flush=True)
        sys.exit(0)
    print("acquired?!", flush=True)
    sys.exit(3)
    """
)


def test_sigint_interrupts_waiting_acquire_in_child(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    client = Client(url)
    holder = client.acquire(resource, ttl=30)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, url, resource],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    time.sleep(0.5)  # let it enter the waiting acquire
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, (out, err)
    assert out.startswith("interrupted after"), (out, err)
    # The interrupted attempt took nothing: once the holder leaves, the key is gone.
    holder.release()
    time.sleep(0.3)
    assert r1.exists(lock_key(resource)) == 0


def test_interrupt_main_interrupts_waiting_acquire(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    client = Client(url)
    holder = client.acquire(resource, ttl=30)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        client.acquire(resource, ttl=5, wait=120)
    timer.join()
    holder.release()
    time.sleep(0.3)
    assert r1.exists(lock_key(resource)) == 0


def test_interrupt_main_interrupts_lost_wait(url: str, resource: str) -> None:
    client = Client(url)
    lock = client.acquire(resource, ttl=30)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        lock.lost.wait()
    timer.join()
    lock.release()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_gets_closed_error(url: str, resource: str) -> None:
    client = Client(url)
    client.acquire(resource, ttl=5).release()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report what happened through the pipe, never return to pytest
        code = 1
        try:
            os.close(r)
            try:
                client.acquire(resource, ttl=5, wait=0)
                message = b"acquired"
            except fencelock.ClosedError as err:
                message = b"closed: " + str(err).encode()
                # A client made in the child works.
                with Client(url).lock(resource, ttl=5):
                    pass
                code = 0
            except BaseException as err:  # noqa: BLE001
                message = repr(err).encode()
            os.write(w, message)
        finally:
            os._exit(code)
    os.close(w)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.02)
    message = os.read(r, 4096).decode()
    os.close(r)
    assert os.waitstatus_to_exitcode(status) == 0, message
    assert message.startswith("closed: ") and "fork" in message, message
    # The parent's client keeps working.
    with client.lock(resource, ttl=5):
        pass


def _gone(r: "redis.Redis[str]", key: str, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while r.exists(key) and time.monotonic() < deadline:
        time.sleep(0.05)
    return r.exists(key) == 0


def test_ctrl_c_as_the_grant_arrives_releases_the_lock(
    url: str, resource: str, r1: "redis.Redis[str]"
) -> None:
    """Ctrl-C that loses the race with the grant: the lock nobody received
    is released in the background, not left to block the resource for its ttl."""
    from urllib.parse import urlparse

    from delay_proxy import DelayProxy

    port = urlparse(url).port
    assert port is not None
    proxy = DelayProxy(port, 0.15)  # the grant lands at once, its reply comes 150 ms later
    client = Client(proxy.url, node_timeout=2, connect_timeout=5)

    def slow_interrupt(signum: int, frame: object) -> None:
        time.sleep(0.4)  # the reply arrives while the handler runs
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, slow_interrupt)
    try:
        threading.Timer(0.03, _thread.interrupt_main).start()
        with pytest.raises(KeyboardInterrupt):
            client.acquire(resource, ttl=30, wait=5)
        signal.signal(signal.SIGINT, previous)
        # The release goes through the proxy too: keep it open until then.
        assert _gone(r1, lock_key(resource)), "the granted lock was left unreleased"
    finally:
        signal.signal(signal.SIGINT, previous)
        proxy.close()

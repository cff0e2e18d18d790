"""Every bad input gets a documented exception, never a crash."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import fencelock
import pytest
from fencelock import AsyncClient, Client

BAD_SECONDS = [float("nan"), float("inf"), float("-inf"), -1, -0.5, 0, 0.0, True, False]


@pytest.mark.parametrize("bad", BAD_SECONDS, ids=repr)
def test_bad_ttl_is_value_error(url: str, resource: str, bad: Any) -> None:
    client = Client(url)
    with pytest.raises(ValueError) as err:
        client.acquire(resource, ttl=bad)
    assert isinstance(err.value, fencelock.InvalidArgumentError)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.try_acquire(resource, ttl=bad)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.lock(resource, ttl=bad)


@pytest.mark.parametrize("bad", BAD_SECONDS, ids=repr)
def test_bad_ttl_async_and_extend(url: str, resource: str, bad: Any) -> None:
    client = Client(url)
    with client.lock(resource, ttl=5) as lock:
        with pytest.raises(fencelock.InvalidArgumentError):
            lock.extend(bad)

    async def main() -> None:
        ac = AsyncClient(url)
        with pytest.raises(fencelock.InvalidArgumentError):
            await ac.acquire(resource, ttl=bad)
        async with ac.lock(resource, ttl=5) as alock:
            with pytest.raises(fencelock.InvalidArgumentError):
                await alock.extend(bad)

    asyncio.run(main())


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1, True])
def test_bad_wait_and_timeouts(url: str, resource: str, bad: Any) -> None:
    client = Client(url)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.acquire(resource, ttl=5, wait=bad)
    with client.lock(resource, ttl=5) as lock:
        with pytest.raises(fencelock.InvalidArgumentError):
            lock.lost.wait(timeout=bad)
    with pytest.raises(fencelock.ConfigError):
        Client(url, node_timeout=bad)
    with pytest.raises(ValueError):
        Client(url, default_ttl=bad)


def test_ttl_out_of_core_range(url: str, resource: str) -> None:
    client = Client(url)
    with pytest.raises(fencelock.InvalidArgumentError, match="too short"):
        client.acquire(resource, ttl=0.001)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.acquire(resource, ttl=fencelock.MAX_TTL + 1)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.acquire(resource, ttl=1e300)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.acquire(resource, ttl=5, wait=1e12)


def test_wrong_types_are_type_errors(url: str, resource: str) -> None:
    client = Client(url)
    with pytest.raises(TypeError):
        client.acquire(resource, ttl="5")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.acquire(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.acquire(resource, ttl=5, on_lost=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.acquire(resource, ttl=5, unknown=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Client(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Client(url, tls_ca_pem=42)  # type: ignore[arg-type]


def test_bad_resources(url: str) -> None:
    client = Client(url)
    for bad in ["", "}starts-with-brace", "x" * (fencelock.MAX_RESOURCE_LEN + 1)]:
        with pytest.raises(fencelock.InvalidArgumentError):
            client.acquire(bad, ttl=5)
    with pytest.raises(ValueError):
        client.acquire("", ttl=5)


def test_bad_fenced_set_arguments(url: str, resource: str) -> None:
    client = Client(url)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.fenced_set("", "v", 1)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.fenced_set(f"data:{resource}", "v", -1)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.fenced_set(f"data:{resource}", "v", 2**64)
    with pytest.raises(fencelock.InvalidArgumentError):
        client.fenced_set(f"data:{resource}", "v", True)
    with pytest.raises(TypeError):
        client.fenced_set(f"data:{resource}", b"v", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.fenced_set(f"data:{resource}", "v", 1.5)  # type: ignore[arg-type]
    with pytest.raises(fencelock.InvalidArgumentError):
        client.fenced_set(f"data:{resource}", "v", "not a fence")
    # A key of the form of a lock key could overwrite a lock or its counter.
    with pytest.raises(fencelock.InvalidArgumentError):
        client.fenced_set("fencelock:{" + resource + "}", "v", 1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"nodes": []},
        {"nodes": ["not a url"]},
        {"nodes": ["redis://127.0.0.1:1", "redis://127.0.0.1:1"]},
        {"nodes": ["redis://127.0.0.1:1"], "key_prefix": "{bad}"},
        {"nodes": ["redis://127.0.0.1:1"], "drift_factor": 0.5},
        {"nodes": ["redis://127.0.0.1:1"], "drift_factor": float("nan")},
        {"nodes": ["redis://127.0.0.1:1"], "drift_factor": True},
        {"nodes": ["redis://127.0.0.1:1"], "retry": (0.5, 0.1)},
        {"nodes": ["redis://127.0.0.1:1"], "retry": (0, 0.1)},
        {"nodes": ["redis://127.0.0.1:1", "rediss://127.0.0.1:2"]},
        {"nodes": ["redis://127.0.0.1:1"], "tls_client_cert_pem": "x"},
        {"nodes": ["redis://127.0.0.1:1"], "connect_timeout": 0},
    ],
)
def test_bad_configuration_is_config_error(kwargs: Any) -> None:
    with pytest.raises(fencelock.ConfigError) as err:
        Client(**kwargs)
    assert isinstance(err.value, ValueError)
    assert err.value.kind == "config" and err.value.code == 8
    with pytest.raises(fencelock.ConfigError):
        AsyncClient(**kwargs)


def test_unreachable_node_fails_at_use_not_at_build() -> None:
    client = Client("redis://127.0.0.1:1", connect_timeout=0.2, node_timeout=0.1)
    with pytest.raises(fencelock.UnavailableError) as err:
        client.acquire("x", ttl=5, wait=0)
    assert "127.0.0.1:1" in str(err.value)
    assert err.value.nodes[0].outcome in ("failed", "timed_out")


def test_wrong_password_is_auth_error(url: str) -> None:
    with pytest.raises(fencelock.AuthError):
        Client(url, username="nobody", password="wrong")


def test_errors_pickle_with_their_details(url: str, resource: str) -> None:
    client = Client(url)
    with client.lock(resource, ttl=5):
        with pytest.raises(fencelock.NotAcquiredError) as err:
            client.acquire(resource, ttl=5, wait=0)
    copy = pickle.loads(pickle.dumps(err.value))
    assert type(copy) is fencelock.NotAcquiredError
    assert str(copy) == str(err.value)
    assert copy.resource == resource and copy.nodes == err.value.nodes


def test_hierarchy() -> None:
    assert issubclass(fencelock.InvalidArgumentError, ValueError)
    assert issubclass(fencelock.ConfigError, ValueError)
    # The names of version 0.1 are the same classes.
    assert fencelock.NotAcquired is fencelock.NotAcquiredError
    assert fencelock.Closed is fencelock.ClosedError


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_tls_min_version_accepts_1_2_and_1_3(url: str, resource: str, version: Any) -> None:
    # A plain redis:// node ignores the TLS minimum: the client works with either.
    with Client(url, tls_min_version=version) as client:
        with client.lock(resource, ttl=5, wait=0) as lock:
            assert lock.is_held()

    async def main() -> None:
        client = await AsyncClient.connect(url, tls_min_version=version)
        lock = await client.acquire(resource, ttl=5, wait=0)
        await lock.release()

    asyncio.run(main())
    Client(url, tls_min_version=None).close()  # None keeps the default


def test_tls_min_version_reaches_the_core() -> None:
    # TLS 1.3 cannot be applied to a Redis Cluster: the core says so.
    with pytest.raises(fencelock.ConfigError, match="tls-protocols"):
        Client("rediss+cluster://127.0.0.1:1", tls_min_version="1.3")
    with pytest.raises(fencelock.ConfigError, match="tls-protocols"):
        AsyncClient("rediss+cluster://127.0.0.1:1", tls_min_version="1.3")


@pytest.mark.parametrize(
    "bad", ["1.1", "1.4", "1.0", "", "1", "13", "1.30", " 1.3", "TLSv1.3"], ids=repr
)
def test_tls_min_version_other_strings_are_config_errors(bad: Any) -> None:
    with pytest.raises(fencelock.ConfigError) as err:
        Client("redis://127.0.0.1:1", tls_min_version=bad)
    assert isinstance(err.value, ValueError)
    assert str(err.value).startswith(f"tls_min_version must be '1.2' or '1.3', got {bad!r}")
    with pytest.raises(fencelock.ConfigError, match="tls_min_version must be '1.2' or '1.3'"):
        AsyncClient("redis://127.0.0.1:1", tls_min_version=bad)

    async def main() -> None:
        await AsyncClient.connect("redis://127.0.0.1:1", tls_min_version=bad)

    with pytest.raises(fencelock.ConfigError, match="tls_min_version must be '1.2' or '1.3'"):
        asyncio.run(main())


@pytest.mark.parametrize("bad", [1.3, 1.2, 13, 1, True, False, b"1.3", ("1.3",)], ids=repr)
def test_tls_min_version_non_strings_are_type_errors(bad: Any) -> None:
    kind = type(bad).__name__
    message = f"tls_min_version must be the string '1.2' or '1.3', not {kind}"
    with pytest.raises(TypeError) as err:
        Client("redis://127.0.0.1:1", tls_min_version=bad)
    assert str(err.value) == message
    with pytest.raises(TypeError, match="tls_min_version must be the string"):
        AsyncClient("redis://127.0.0.1:1", tls_min_version=bad)

"""Fixtures: real redis-server nodes (session-scoped), unique resource names."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Iterator, List

import pytest
import redis

sys.path.insert(0, str(Path(__file__).parent))

from redis_nodes import RedisNodes  # noqa: E402


@pytest.fixture(scope="session")
def nodes1() -> Iterator[RedisNodes]:
    """One node: single-node locks."""
    with RedisNodes(1) as nodes:
        yield nodes


@pytest.fixture(scope="session")
def nodes5() -> Iterator[RedisNodes]:
    """Five nodes: Redlock (quorum 3). Tests must not kill these."""
    with RedisNodes(5) as nodes:
        yield nodes


@pytest.fixture
def nodes3() -> Iterator[RedisNodes]:
    """Three fresh nodes per test, for tests that kill or pause some."""
    with RedisNodes(3) as nodes:
        yield nodes


@pytest.fixture
def url(nodes1: RedisNodes) -> str:
    return nodes1.urls[0]


@pytest.fixture
def urls5(nodes5: RedisNodes) -> List[str]:
    return nodes5.urls


@pytest.fixture
def resource(request: pytest.FixtureRequest) -> str:
    """A resource name no other test uses."""
    return f"test:{request.node.name}:{uuid.uuid4().hex[:12]}"


@pytest.fixture
def r1(url: str) -> Iterator["redis.Redis[str]"]:
    """redis-py on the single node, for assertions."""
    client = redis.Redis.from_url(url, decode_responses=True)
    yield client
    client.close()

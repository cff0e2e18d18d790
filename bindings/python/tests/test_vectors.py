"""The shared protocol vectors (tests/vectors/protocol.json) through the Python front."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import fencelock
import pytest
import redis

VECTORS: Dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[3] / "tests" / "vectors" / "protocol.json").read_text(
        encoding="utf-8"
    )
)


@pytest.mark.parametrize("vector", VECTORS["keys"], ids=lambda v: f"{v['prefix']}|{v['resource']}")
def test_key_vector_is_the_key_the_client_writes(
    url: str, r1: "redis.Redis[str]", vector: Dict[str, Any]
) -> None:
    with fencelock.Client([url], key_prefix=vector["prefix"]) as client:
        with client.lock(vector["resource"], ttl=5, wait=2) as lock:
            owner = r1.get(vector["lock_key"])
            assert owner is not None and len(owner) == VECTORS["token"]["hex_digits"]
            assert set(owner) <= set(VECTORS["token"]["alphabet"])
            assert r1.get(vector["fence_key"]) == str(lock.fencing_token)


def _invalid_resources() -> List[str]:
    return [
        v["resource"] if "resource" in v else v["resource_repeat"] * v["times"]
        for v in VECTORS["invalid_resources"]
    ]


@pytest.mark.parametrize("resource", _invalid_resources(), ids=lambda r: repr(r[:8]))
def test_invalid_resource_vectors_are_refused(url: str, resource: str) -> None:
    with fencelock.Client([url]) as client:
        with pytest.raises(fencelock.InvalidArgument):
            client.try_acquire(resource, ttl=1)

"""The examples run and succeed; the type stubs match the compiled module."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "python"


@pytest.mark.parametrize("name", ["inventory.py", "cron_once.py", "web_handler.py"])
def test_example_runs(name: str, urls5: List[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--nodes", *urls5[:3]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip(), "the example printed nothing"


def test_stubs_match_the_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "fencelock"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_package_is_typed() -> None:
    import fencelock

    root = Path(fencelock.__file__).parent
    assert (root / "py.typed").exists()
    assert (root / "_native.pyi").exists()


def stub_options(name: str) -> List[str]:
    """The keys of the TypedDict `name` in `_native.pyi`."""
    import fencelock

    stub = ast.parse((Path(fencelock.__file__).parent / "_native.pyi").read_text())
    typed_dict = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == name)
    return [
        item.target.id
        for item in typed_dict.body
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
    ]


def test_stub_option_lists_are_the_runtime_ones(url: str, resource: str) -> None:
    # stubtest cannot see behind `**options`: every key of the stubs' TypedDicts
    # must be an option the runtime takes (None keeps its default).
    from fencelock import AsyncClient, Client

    client_options, lock_options = stub_options("ClientOptions"), stub_options("LockOptions")
    assert len(client_options) == 15 and len(lock_options) == 5
    for key in client_options:
        Client(url, **{key: None}).close()
    client = Client(url)
    for key in lock_options:
        client.lock(resource, **{key: None})
        client.try_acquire(resource, **{key: None}).release()

    async def main() -> None:
        (await AsyncClient.connect(url, **{key: None for key in client_options})).close()
        aclient = AsyncClient(url, **{key: None for key in client_options})
        lock = await aclient.acquire(resource, **{key: None for key in lock_options})
        await lock.release()

    asyncio.run(main())
    for call in (Client, AsyncClient, AsyncClient.connect):
        with pytest.raises(TypeError, match="got an unexpected keyword argument 'max_hold'"):
            call(url, max_hold=None)
    with pytest.raises(
        TypeError, match=r"^Client.acquire\(\) got an unexpected keyword argument 'retry'$"
    ):
        client.acquire(resource, retry=None)

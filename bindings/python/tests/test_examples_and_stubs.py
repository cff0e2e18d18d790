"""The examples run and succeed; the type stubs match the compiled module."""

from __future__ import annotations

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

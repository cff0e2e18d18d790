"""The benchmarks' guard against measuring a debug build of fencelock."""

from __future__ import annotations

import sys
from pathlib import Path


def require_release_build() -> None:
    """Exits with instructions when the installed fencelock is a debug build.

    scripts/test-python.sh installs a debug build into target/python-venv (it
    reuses the crates `cargo test` compiled); its timings say nothing about a
    release build. Builds from before the profile was recorded pass.
    """
    import fencelock._native as native

    if getattr(native, "_build_profile", "release") != "release":
        source = Path(__file__).resolve().parents[1]
        sys.exit(
            f"fencelock in {sys.prefix} is a debug build ({native.__file__}); "
            "benchmarks need a release build: "
            f"{sys.executable} -m pip install --force-reinstall --no-deps {source}"
        )

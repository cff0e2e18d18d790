#!/usr/bin/env bash
# Tests the Python front on a fresh Debian machine with python3 (+pip):
# installs `./bindings/python` (a debug build) into a virtualenv under
# target/python-venv, checks the type stubs against the compiled module,
# runs the pytest suite against real redis-server nodes, and runs the
# examples. Idempotent; exits non-zero on any failure (including pytest
# collecting no tests).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh

venv=target/python-venv
if [ ! -x "$venv/bin/python" ]; then
  echo "== creating $venv"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    echo "python3 -m venv failed; installing python3-venv from Debian's packages"
    rm -rf "$venv"
    sudo_cmd=""
    if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
fi
py="$venv/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1

echo "== pip install test dependencies"
"$py" -m pip install -q -r bindings/python/requirements-test.txt

echo "== pip install ./bindings/python (maturin, debug build)"
# A debug build (cargo's dev profile, no --target), so that it reuses the
# crates `cargo test` compiled into target/debug: the extension alone is
# compiled here. A release build of it is tested too: scripts/package.sh
# builds the wheel, and scripts/test-packages.sh runs this suite against it.
# The benchmarks refuse this build (bindings/python/bench/release_build.py).
MATURIN_PEP517_ARGS="--profile dev" \
  "$py" -m pip install -q --force-reinstall --no-deps ./bindings/python

echo "== cargo build redis-nodes (test harness)"
cargo build -q -p fencelock-harness --bin redis-nodes

echo "== ruff format --check, ruff check"
"$venv/bin/ruff" format --check bindings/python examples/python
"$venv/bin/ruff" format --check --config bindings/python/pyproject.toml bench/contention
"$venv/bin/ruff" check --config bindings/python/pyproject.toml bindings/python examples/python bench/contention

echo "== mypy.stubtest fencelock"
(cd target && "../$py" -m mypy.stubtest fencelock)

echo "== mypy on the examples (typed against the stubs)"
(cd examples/python && "../../$py" -m mypy --strict --no-error-summary \
  --follow-imports=silent inventory.py cron_once.py web_handler.py)

echo "== the benchmarks refuse this debug build"
if refusal=$("$py" bindings/python/bench/bench.py --seconds 0.1 2>&1); then
  echo "bindings/python/bench/bench.py ran against a debug build" >&2
  exit 1
fi
grep -qF "is a debug build" <<<"$refusal" || { echo "unexpected: $refusal" >&2; exit 1; }

echo "== pytest"
# Run from bindings/python so `import fencelock` is the installed package.
# pytest exits 5 when it collects no test: that fails this script too.
(cd bindings/python && "../../$py" -m pytest -q -p no:cacheprovider tests)

echo "== examples"
for example in inventory cron_once web_handler; do
  echo "-- examples/python/$example.py"
  "$py" "examples/python/$example.py"
done
echo "== Python front: all checks passed"

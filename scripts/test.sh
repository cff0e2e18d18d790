#!/usr/bin/env bash
# Runs every test: formatting, lints, and the test suites against real
# redis-server processes (installing the Debian package if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
if cargo fmt --version >/dev/null 2>&1; then
  echo "== cargo fmt --check"
  cargo fmt --all -- --check
else
  echo "== SKIPPED cargo fmt: rustfmt is not installed (rustup component add rustfmt)"
fi
if cargo clippy --version >/dev/null 2>&1; then
  echo "== cargo clippy (all targets, warnings are errors)"
  cargo clippy --workspace --all-targets --quiet -- -D warnings
else
  echo "== SKIPPED cargo clippy: clippy is not installed (rustup component add clippy)"
fi
echo "== cargo test"
# One test at a time: the suites start their own Redis nodes and check timing
# bounds (loss detected within a renew interval), which a 2-core machine
# running several such tests at once would blur.
cargo test --workspace -- --test-threads=1

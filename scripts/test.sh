#!/usr/bin/env bash
# Runs every test: formatting, lints, and the test suites against real
# redis-server processes (installing the Debian package if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace

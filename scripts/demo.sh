#!/usr/bin/env bash
# Runs the demo: starts its own local redis-server nodes (installing the
# Debian package if missing), shows what fencelock guarantees, stops them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
exec cargo run --quiet --release -p fencelock-demo

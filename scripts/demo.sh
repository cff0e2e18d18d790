#!/usr/bin/env bash
# Runs the demo: starts its own local redis-server nodes (installing the
# Debian package if missing), shows what fencelock guarantees, stops them.
# The last scene takes one lock from every language; the C, command-line and
# Rust parts are built here, the Python, Node and .NET fronts when
# ./scripts/test.sh (or their scripts/test-*.sh) has built them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
cargo build --quiet --release -p fencelock-demo -p fencelock-cli -p fencelock-ffi
if command -v gcc >/dev/null 2>&1; then
  gcc -std=c11 -O2 -I include tests/interop/workers/worker.c -L target/release \
    -Wl,-rpath,"$(pwd)/target/release" -lfencelock -o target/release/interop-worker-c
fi
if [ -f target/dotnet/FenceLock.dll ] && command -v mcs >/dev/null 2>&1; then
  mcs -target:exe -out:target/dotnet/InteropWorker.exe -r:target/dotnet/FenceLock.dll \
    tests/interop/workers/Worker.cs >/dev/null
fi
exec target/release/fencelock-demo

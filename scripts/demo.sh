#!/usr/bin/env bash
# Runs the demo: starts its own local redis-server nodes (installing the
# Debian package if missing), shows what fencelock guarantees, stops them.
# The last scene takes one lock from every language: the C, command-line and
# Rust parts are built here; the Python, Node, .NET, JVM and Go fronts are
# installed from the packages in dist/ (scripts/install-fronts.sh builds a
# missing package with scripts/package.sh), for each language installed here.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
# The packages' release build (scripts/release-build.sh, with their toolchain:
# scripts/package/toolchain.sh), so that the packages built below reuse its crates.
source scripts/package/common.sh
release=$FENCELOCK_RELEASE_DIR
with_zig cargo build --quiet --release --target "$FENCELOCK_HOST_TARGET" -p fencelock-demo -p fencelock-cli -p fencelock-ffi
if command -v gcc >/dev/null 2>&1; then
  gcc -std=c11 -O2 -I include tests/interop/workers/worker.c -L "$release" \
    -Wl,-rpath,"$release" -lfencelock -o "$release/interop-worker-c"
fi
scripts/install-fronts.sh target/demo-fronts
FENCELOCK_INTEROP_FRONTS="$(pwd)/target/demo-fronts" exec "$release/fencelock-demo"

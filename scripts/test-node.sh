#!/usr/bin/env bash
# Tests the Node front on a fresh Debian machine with node (>= 20.17) and npm:
# builds the redis-nodes harness, installs bindings/node's devDependencies,
# builds the addon as a debug build, type-checks the TypeScript test file,
# runs the node:test suite against real redis-server nodes, checks
# formatting, and runs the example. Idempotent; exits non-zero on any failure.
#
# The addon is built by cargo alone, into target/debug beside the crates
# `cargo test` compiled, and copied to where the napi-rs loader (native.js)
# looks for it; `napi build` always passes --target, which would compile
# tokio, redis and the core once more for a target directory of their own.
# The release build from build.js (the package's "prepare" script) is built
# and tested by scripts/package/node.sh, which also checks that it leaves the
# committed loader and typings (native.js, native.d.ts) unchanged
# (docs/performance.md, "one toolchain for every package").
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node and npm are required for the Node front (Node >= 20.17)" >&2
  exit 1
fi
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

echo "== cargo build -p fencelock-harness --bin redis-nodes"
cargo build -q -p fencelock-harness --bin redis-nodes

echo "== npm install (bindings/node devDependencies; no \"prepare\", so no release build)"
# `npm install`, not `npm ci`: the registry mirror lags on other platforms'
# optional packages, so a lock written here may not satisfy `npm ci`.
(cd bindings/node && npm install --ignore-scripts --no-audit --no-fund)

if [ "$(uname -s)" != Linux ] || { ldd --version 2>&1 || true; } | grep -qi musl; then
  echo "the Node front's tests build its addon for Linux with glibc only" >&2
  exit 1
fi
addon="fencelock.linux-$(node -p process.arch)-gnu.node"
echo "== cargo build -p fencelock-node; target/debug/libfencelock_node.so as bindings/node/$addon"
cargo build -q -p fencelock-node
cp --remove-destination "${CARGO_TARGET_DIR:-target}/debug/libfencelock_node.so" "bindings/node/$addon"
profile=$(cd bindings/node && node -p "require('./native.js').BUILD_PROFILE")
[ "$profile" = debug ] || { echo "bindings/node/$addon says it is a '$profile' build, not the debug build just copied" >&2; exit 1; }
echo "== the benchmarks refuse this debug build"
if refusal=$(cd bindings/node && node -e "require('./bench/release-build.js').requireReleaseBuild()" 2>&1); then
  echo "bindings/node/bench/release-build.js accepted a debug addon" >&2
  exit 1
fi
grep -qF "is a debug build; benchmarks need a release build" <<<"$refusal" ||
  { echo "bindings/node/bench/release-build.js failed otherwise: $refusal" >&2; exit 1; }

echo "== tsc --noEmit (TypeScript file using await using)"
(cd bindings/node && npm run --silent typecheck)

echo "== prettier --check"
(cd bindings/node && npx --no-install prettier --check . >/dev/null)

echo "== node --test"
(cd bindings/node && npm test)

echo "== example (examples/node)"
# (--ignore-scripts: the linked bindings/node would run "prepare", a release build.)
(cd examples/node && npm install --ignore-scripts --no-audit --no-fund >/dev/null && node demo.js)

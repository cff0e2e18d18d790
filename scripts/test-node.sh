#!/usr/bin/env bash
# Tests the Node front on a fresh Debian machine with node (>= 20.17) and npm:
# builds the redis-nodes harness, runs `npm install` in bindings/node (whose
# "prepare" script builds the napi-rs addon from source), checks that the
# build left the committed loader and typings (native.js, native.d.ts)
# unchanged, type-checks the TypeScript test file, runs the node:test suite
# against real redis-server nodes, checks formatting, and runs the example.
# Idempotent; exits non-zero on any failure.
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

echo "== npm install (bindings/node; builds the addon)"
# `npm install`, not `npm ci`: the registry mirror lags on other platforms'
# optional packages, so a lock written here may not satisfy `npm ci`.
(cd bindings/node && npm install --no-audit --no-fund)
# A fresh clone builds in `prepare`; when npm found nothing to install it may
# skip it, so build explicitly when the addon is missing or older than the sources.
addon=$(ls bindings/node/fencelock.*.node 2>/dev/null | head -1 || true)
if [ -z "$addon" ] || [ -n "$(find bindings/node/src bindings/node/Cargo.toml core/src -newer "$addon" -print -quit)" ]; then
  (cd bindings/node && npm run build)
fi

echo "== committed loader and typings match the build"
git diff --exit-code -- bindings/node/native.js bindings/node/native.d.ts

echo "== tsc --noEmit (TypeScript file using await using)"
(cd bindings/node && npm run --silent typecheck)

echo "== prettier --check"
(cd bindings/node && npx --no-install prettier --check . >/dev/null)

echo "== node --test"
(cd bindings/node && npm test)

echo "== example (examples/node)"
(cd examples/node && npm install --no-audit --no-fund >/dev/null && node demo.js)

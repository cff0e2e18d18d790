#!/usr/bin/env bash
# Tests the Go front (bindings/go, cgo over the C ABI) on a fresh Debian
# machine with Go >= 1.24 (the CI image ships it in /usr/local/go; Debian's
# golang-go is too old): builds the redis-nodes harness and libfencelock.a
# (release), copies the library and header into the module
# (bindings/go/build-lib.sh), checks formatting (gofmt -l) and go vet, runs
# `go test -race` against real redis-server nodes, and runs the example.
# Idempotent; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/ensure-deps.sh

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
  echo "go is required for the Go front (Go 1.24 or newer; Debian's golang-go is 1.19, too old)" >&2
  exit 1
fi
version=$(go env GOVERSION)
minor=$(sed -E 's/^go1\.([0-9]+).*/\1/' <<<"$version")
if ! [[ $minor =~ ^[0-9]+$ ]] || [ "$minor" -lt 24 ]; then
  echo "the Go front needs Go 1.24 or newer; found $version" >&2
  exit 1
fi
# Never download another toolchain: use the one installed.
export GOTOOLCHAIN=local

echo "== cargo build redis-nodes; libfencelock.a into bindings/go/lib ($version)"
cargo build -q -p fencelock-harness --bin redis-nodes
bindings/go/build-lib.sh

modules=(bindings/go examples/go tests/interop/workers/go)
echo "== gofmt -l"
unformatted=$(gofmt -l "${modules[@]}")
if [ -n "$unformatted" ]; then
  echo "gofmt: these files are not formatted (run gofmt -w):" >&2
  echo "$unformatted" >&2
  exit 1
fi
echo "== go vet"
for module in "${modules[@]}"; do (cd "$module" && go vet ./...); done

echo "== go test -race (bindings/go)"
export FENCELOCK_REDIS_NODES="$root/target/debug/redis-nodes"
export FENCELOCK_VECTORS="$root/tests/vectors/protocol.json"
# -v for the test names and skip reasons; the RUN/PAUSE/CONT lines are noise.
(cd bindings/go && go test -race -count=1 -v ./...) | grep -v -E '^=== (RUN|PAUSE|CONT)'

echo "== Go example against one harness node: two copies at once"
mkdir -p target/go
(cd examples/go && go build -o "$root/target/go/inventory" .)
examples/go/check.sh target/go/inventory

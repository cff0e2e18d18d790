#!/usr/bin/env bash
# One lock, every language: builds each worker and runs tests/interop/interop.py
# (5 nodes, then 1). Needs the fronts built by scripts/test-python.sh,
# scripts/test-node.sh, scripts/test-dotnet.sh, scripts/test-jvm.sh and
# scripts/test-go.sh (scripts/test.sh runs them first).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

need() { [ -e "$1" ] || { echo "interop: $1 is missing; run $2 first" >&2; exit 1; }; }
need target/python-venv/bin/python scripts/test-python.sh
compgen -G "bindings/node/*.node" >/dev/null || { echo "interop: the Node addon is not built; run scripts/test-node.sh first" >&2; exit 1; }
need target/dotnet/FenceLock.dll scripts/test-dotnet.sh
need bindings/jvm/target/classpath.txt scripts/test-jvm.sh
need bindings/go/lib/include/fencelock.h scripts/test-go.sh

cargo build -q -p fencelock-ffi -p fencelock-harness --lib --bin redis-nodes
cargo build -q -p fencelock-cli
cargo build -q -p fencelock-demo
cargo build -q -p fencelock --example inventory

gcc -std=c11 -O2 -Wall -Werror -I include tests/interop/workers/worker.c -L target/debug \
  -Wl,-rpath,"$root/target/debug" -lfencelock -o target/debug/interop-worker-c
mcs -target:exe -out:target/dotnet/InteropWorker.exe -r:target/dotnet/FenceLock.dll -warnaserror+ \
  tests/interop/workers/Worker.cs
cp target/debug/libfencelock.so target/dotnet/
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi
(cd tests/interop/workers/go && GOTOOLCHAIN=local go build -o "$root/target/go/interop-worker" .)

echo "== Rust example: three inventory processes on three nodes"
coproc nodes { target/debug/redis-nodes --nodes 3; }
read -r line <&"${nodes[0]}"
urls=$(grep -o 'redis://[^"]*' <<<"$line" | paste -sd, -)
pids=()
for _ in 1 2 3; do
  FENCELOCK_NODES=$urls target/debug/examples/inventory sku-interop 5 >/dev/null &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
# (No `tee /dev/stderr`: when stderr is a log file, tee reopens and truncates it.)
stock=$(FENCELOCK_NODES=$urls target/debug/examples/inventory sku-interop 0)
echo "$stock"
grep -q "stock of sku-interop: 85 " <<<"$stock" || { echo "interop: the Rust example lost an update" >&2; exit 1; }
exec {nodes[1]}>&-
wait "$nodes_PID"

echo "== one lock, every language"
FENCELOCK_PYTHON="$root/target/python-venv/bin/python" target/python-venv/bin/python tests/interop/interop.py "$@"

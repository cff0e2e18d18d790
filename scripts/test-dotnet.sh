#!/usr/bin/env bash
# Builds libfencelock and the .NET binding with Mono, then runs the .NET
# tests and the example against real redis-server nodes started by the shared
# harness (target/debug/redis-nodes). Installs redis-server and Mono from
# Debian's packages when missing. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/ensure-deps.sh

source bindings/dotnet/mono.sh
dotnet_ensure_tools mcs mono

# The same packages as the C tests, so cargo reuses one feature set; --lib
# too, for without it --bin narrows the build to redis-nodes and a stale
# libfencelock.so would be tested.
cargo build -p fencelock-ffi -p fencelock-harness --lib --bin redis-nodes

out=target/dotnet
mkdir -p "$out"
echo "== mcs: FenceLock.dll, Tests.exe, Example.exe ($(mcs --version))"
dotnet_compile_library "$out"
dotnet_compile_programs "$out" "$out/FenceLock.dll"
# Beside the assemblies: Mono's DllImport("fencelock") looks there for libfencelock.so.
cp target/debug/libfencelock.so "$out/"

export FENCELOCK_REDIS_NODES="$root/target/debug/redis-nodes"
echo "== .NET tests (Mono)"
mono --debug "$out/Tests.exe"

echo "== .NET example (Mono) against one harness node"
dotnet_run_example "$out/Example.exe"

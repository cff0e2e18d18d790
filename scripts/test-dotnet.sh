#!/usr/bin/env bash
# Builds libfencelock and the .NET binding with Mono, then runs the .NET
# tests and the example against real redis-server nodes started by the shared
# harness (target/debug/redis-nodes). Installs redis-server and Mono from
# Debian's packages when missing. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/ensure-deps.sh

if ! command -v mcs >/dev/null 2>&1 || ! command -v mono >/dev/null 2>&1; then
  echo "installing mono-mcs mono-runtime from Debian's packages (apt-get)…"
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends mono-mcs mono-runtime >/dev/null
fi
command -v mcs >/dev/null 2>&1 && command -v mono >/dev/null 2>&1 || { echo "could not install Mono" >&2; exit 1; }

# The same command as the other scripts, so cargo reuses one feature set.
cargo build -p fencelock-ffi -p fencelock-harness --bin redis-nodes

out=target/dotnet
mkdir -p "$out"
echo "== mcs: FenceLock.dll, Tests.exe, Example.exe ($(mcs --version))"
mcs -target:library -out:"$out/FenceLock.dll" -doc:"$out/FenceLock.xml" -warnaserror+ bindings/dotnet/src/*.cs
mcs -target:exe -out:"$out/Tests.exe" -r:"$out/FenceLock.dll" -warnaserror+ bindings/dotnet/tests/*.cs
mcs -target:exe -out:"$out/Example.exe" -r:"$out/FenceLock.dll" -warnaserror+ examples/dotnet/Program.cs
# Beside the assemblies: Mono's DllImport("fencelock") looks there for libfencelock.so.
cp target/debug/libfencelock.so "$out/"

export FENCELOCK_REDIS_NODES="$root/target/debug/redis-nodes"
echo "== .NET tests (Mono)"
mono --debug "$out/Tests.exe"

echo "== .NET example (Mono) against one harness node"
coproc NODES { exec "$FENCELOCK_REDIS_NODES" --nodes 1; }
nodes_pid=$NODES_PID
read -r first_line <&"${NODES[0]}"
url=$(printf '%s\n' "$first_line" | grep -o 'redis://[^"]*' | head -n 1)
status=0
output=$(FENCELOCK_NODES="$url" mono --debug "$out/Example.exe") || status=$?
exec {NODES[1]}>&-  # end of stdin stops the node
wait "$nodes_pid" || true
printf '%s\n' "$output"
if [ "$status" != 0 ] \
  || ! grep -q '^B: 409 busy' <<<"$output" \
  || ! grep -q '^A: 200 paid order .* (fencing token [0-9]*)' <<<"$output" \
  || ! grep -q '^C: 200 .* already paid' <<<"$output"; then
  echo "example: unexpected output or exit status $status" >&2
  exit 1
fi
echo "example: ok"

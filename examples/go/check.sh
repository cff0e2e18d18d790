#!/usr/bin/env bash
# Runs a built Go inventory example against one harness node: two copies at
# once, 3 decrements each, then a read; the stock must be exactly 94.
#   examples/go/check.sh INVENTORY_BINARY     (needs FENCELOCK_REDIS_NODES)
# Used by scripts/test-go.sh and by the Go package's test (scripts/package/go.sh).
set -euo pipefail
inventory=$1
: "${FENCELOCK_REDIS_NODES:?FENCELOCK_REDIS_NODES must name the harness binary (redis-nodes)}"
coproc NODES { exec "$FENCELOCK_REDIS_NODES" --nodes 1; }
nodes_pid=$NODES_PID
read -r first_line <&"${NODES[0]}"
url=$(printf '%s\n' "$first_line" | grep -o 'redis://[^"]*' | head -n 1)
sku="go-$$"
status=0
FENCELOCK_NODES="$url" "$inventory" "$sku" 3 >/dev/null &
other=$!
FENCELOCK_NODES="$url" "$inventory" "$sku" 3 >/dev/null || status=$?
wait "$other" || status=$?
output=$(FENCELOCK_NODES="$url" "$inventory" "$sku" 0) || status=$?
exec {NODES[1]}>&-  # end of stdin stops the node
wait "$nodes_pid" || true
printf '%s\n' "$output"
if [ "$status" != 0 ] || ! grep -q "^stock of $sku: 94 " <<<"$output"; then
  echo "example: unexpected output or exit status $status" >&2
  exit 1
fi
echo "example: ok"

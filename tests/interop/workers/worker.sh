#!/usr/bin/env bash
# Interop worker (command line): ITERATIONS times, `fencelock run` a shell
# critical section that does a non-atomic read-modify-write of the counter
# file and logs itself. With FENCELOCK_INTEROP_ELECT=1, `fencelock elect`
# (announcing "cli") runs it while leader instead; FENCELOCK_TOKEN is the epoch.
#   worker.sh FENCELOCK_BIN NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE
set -euo pipefail
bin=$1 nodes=$2 resource=$3 iterations=$4 counter=$5 log=$6
export COUNTER=$counter LOG=$log
take=(run --ttl 10s --wait 120s)
if [ "${FENCELOCK_INTEROP_ELECT:-}" = 1 ]; then take=(elect --ttl 10s --wait 120s --value cli); fi
for _ in $(seq "$iterations"); do
  FENCELOCK_NODES=$nodes "$bin" "${take[@]}" "$resource" -- sh -c '
    start=$(date +%s%N)
    value=$(cat "$COUNTER" 2>/dev/null || true)
    sleep 0.003
    echo $(( ${value:-0} + 1 )) > "$COUNTER"
    echo "cli $FENCELOCK_TOKEN $start $(date +%s%N)" >> "$LOG"'
done

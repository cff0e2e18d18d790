#!/usr/bin/env bash
# Interop worker (command line): ITERATIONS times, `fencelock run` a shell
# critical section that does a non-atomic read-modify-write of the counter
# file and logs itself. With FENCELOCK_INTEROP_ELECT=1, `fencelock elect`
# (announcing "cli") runs it while leader instead; FENCELOCK_TOKEN is the epoch.
# FENCELOCK_INTEROP_TAKE (see worker.py): `permits:K` runs with --permits K
# (the counter untouched, FENCELOCK_PERMIT logged as a fifth field), `rw` with
# --read (even iterations, `r`) and --write (odd, `w`).
# FENCELOCK_INTEROP_NODE_TIMEOUT_MS, if set (not empty), is the per-node timeout
# in milliseconds (anything else fails the worker).
#   worker.sh FENCELOCK_BIN NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE
set -euo pipefail
bin=$1 nodes=$2 resource=$3 iterations=$4 counter=$5 log=$6
export COUNTER=$counter LOG=$log
mode=${FENCELOCK_INTEROP_TAKE:-lock}
# The CLI's own default unless a timeout is given.
timeout=()
if [ -n "${FENCELOCK_INTEROP_NODE_TIMEOUT_MS:-}" ]; then timeout=(--node-timeout "${FENCELOCK_INTEROP_NODE_TIMEOUT_MS}ms"); fi
if [ "${FENCELOCK_INTEROP_ELECT:-}" = 1 ]; then mode=elect; fi
for i in $(seq "$iterations"); do
  take=(run --ttl 10s --wait 120s) WRITES=1 EXTRA=""
  case $mode in
    elect) take=(elect --ttl 10s --wait 120s --value cli) ;;
    permits:*) take+=(--permits "${mode#permits:}") WRITES=0 EXTRA=permit ;;
    rw) if [ $((i % 2)) = 0 ]; then take+=(--write) EXTRA=" w"; else take+=(--read) WRITES=0 EXTRA=" r"; fi ;;
  esac
  export WRITES EXTRA
  FENCELOCK_NODES=$nodes "$bin" "${timeout[@]}" "${take[@]}" "$resource" -- sh -c '
    start=$(date +%s%N)
    value=$(cat "$COUNTER" 2>/dev/null || true)
    sleep 0.003
    if [ "$WRITES" = 1 ]; then echo $(( ${value:-0} + 1 )) > "$COUNTER"; fi
    if [ "$EXTRA" = permit ]; then EXTRA=" $FENCELOCK_PERMIT"; fi
    echo "cli $FENCELOCK_TOKEN $start $(date +%s%N)$EXTRA" >> "$LOG"'
done

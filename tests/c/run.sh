#!/usr/bin/env bash
# Builds libfencelock and runs the C tests three ways: plain, under
# AddressSanitizer + UndefinedBehaviorSanitizer, and under valgrind.
# Each run prints "N passed, N failed"; any failure or memory error fails the script.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

cargo build -q -p fencelock-ffi -p fencelock-harness --lib --bin redis-nodes
export FENCELOCK_REDIS_NODES="$root/target/debug/redis-nodes"
export FENCELOCK_VECTORS="$root/tests/vectors/protocol.json"

echo "== installed layout: pkg-config, shared and static linking"
PROFILE=debug scripts/install-c.sh "$root/target/c-prefix" >/dev/null
tests/c/check-installed.sh "$root/target/c-prefix" target/c-tests

run_suite() {
  local label=$1 dir=$2; shift 2
  echo "== C tests ($label)"
  FENCELOCK_EXAMPLE_INVENTORY="$dir/inventory" "$@" "$dir/test_fencelock"
}

make -s -C tests/c
run_suite plain target/c-tests

make -s -C tests/c SANITIZE=1
# detect_leaks: the Rust runtime is leaked on purpose (reachable, so not reported),
# anything else unreachable is a bug.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:print_summary=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_suite "ASan+UBSan" target/c-tests-asan

log=target/c-tests/valgrind.log
run_suite valgrind target/c-tests valgrind --error-exitcode=1 --leak-check=full --fair-sched=yes \
  --suppressions=tests/c/valgrind.supp --log-file="$log"
grep -E "ERROR SUMMARY|definitely lost|indirectly lost|possibly lost" "$log" | sed 's/^==[0-9]*== /valgrind: /' | sort -u

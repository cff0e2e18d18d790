#!/usr/bin/env bash
# Builds libfencelock and runs the C tests three ways: plain, under
# AddressSanitizer + UndefinedBehaviorSanitizer, and under valgrind.
# Each run prints "N passed, N failed"; any failure or memory error fails the script.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

cargo build -q -p fencelock-ffi -p fencelock-harness --bin redis-nodes
export FENCELOCK_REDIS_NODES="$root/target/debug/redis-nodes"
export FENCELOCK_VECTORS="$root/tests/vectors/protocol.json"

echo "== installed layout: pkg-config, shared and static linking"
prefix="$root/target/c-prefix"
PROFILE=debug scripts/install-c.sh "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
test "$(pkg-config --modversion fencelock)" = "$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
mkdir -p target/c-tests
# shellcheck disable=SC2046 # pkg-config output is meant to be split into flags
gcc -std=c11 -Wall -Werror examples/c/inventory.c $(pkg-config --cflags --libs fencelock) \
  -Wl,-rpath,"$prefix/lib" -o target/c-tests/inventory-shared
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Werror examples/c/inventory.c $(pkg-config --cflags fencelock) "$prefix/lib/libfencelock.a" \
  $(pkg-config --libs-only-l --static fencelock | sed 's/-lfencelock//') -o target/c-tests/inventory-static
coproc nodes { "$FENCELOCK_REDIS_NODES" --nodes 1; }
read -r line <&"${nodes[0]}"
url=$(sed 's/.*"\(redis:[^"]*\)".*/\1/' <<<"$line")
for build in shared static; do
  FENCELOCK_NODES=$url target/c-tests/inventory-$build "pc-$build-$$" 2 | grep -q "stock of pc-$build-$$: 98" \
    || { echo "the $build build of the installed library did not work" >&2; exit 1; }
  echo "inventory example linked $build through pkg-config: ok"
done
exec {nodes[1]}>&-
wait "$nodes_PID"

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
run_suite valgrind target/c-tests valgrind --error-exitcode=1 --leak-check=full \
  --suppressions=tests/c/valgrind.supp --log-file="$log"
grep -E "ERROR SUMMARY|definitely lost|indirectly lost|possibly lost" "$log" | sed 's/^==[0-9]*== /valgrind: /' | sort -u

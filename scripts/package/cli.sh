#!/usr/bin/env bash
# The command-line package: fencelock-cli-VERSION-x86_64-linux-gnu.tar.gz,
# the `fencelock` binary (stripped) in one directory.
#   scripts/package/cli.sh build DIST | test DIST     (see scripts/package/common.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/package/common.sh
verb=$1 dist=$2
name="fencelock-cli-$FENCELOCK_VERSION"
tarball="$name-x86_64-linux-gnu.tar.gz"

fill() {
  strip -o "$1/fencelock" "$FENCELOCK_RELEASE_DIR/fencelock"
  package_check_glibc "$1/fencelock" >&2
}

# The unpacked binary: its version; a busy lock refused with the documented
# exit code; then three processes of tests/interop/workers/worker.sh (each
# `fencelock run`s a racy read-modify-write of a counter file five times) on
# one node: no update lost, and the fencing tokens strictly increase in the
# order the critical sections ran.
test_installed() {
  local archive bin work url busy_code status
  archive=$(package_artifact "$dist" "$tarball")
  tar -C "$FENCELOCK_SANDBOX" -xzf "$archive"
  bin="$FENCELOCK_SANDBOX/$name/fencelock"
  "$bin" --version | grep -qF "$FENCELOCK_VERSION" || { echo "fencelock --version does not say $FENCELOCK_VERSION" >&2; return 1; }
  work="$FENCELOCK_SANDBOX/work"
  mkdir -p "$work"
  coproc nodes { "$FENCELOCK_REDIS_NODES" --nodes 1; }
  read -r line <&"${nodes[0]}"
  url=$(sed 's/.*"\(redis:[^"]*\)".*/\1/' <<<"$line")

  # (The harness's nodes run without AOF: fencelock's warning about it goes to a file.)
  # The holder waits: a probe below may take the lock first, for a moment.
  FENCELOCK_NODES=$url "$bin" run --ttl 10s --wait 10s package-busy -- sleep 3 2>>"$work/stderr" &
  local holder=$!
  busy_code=$(python3 -c 'import json, sys
kinds = json.load(open(sys.argv[1]))["error_kinds"]
print(next(k["cli_exit"] for k in kinds if k["name"] == "not_acquired"))' tests/vectors/protocol.json)
  status=0
  for _ in $(seq 50); do
    status=0
    FENCELOCK_NODES=$url "$bin" run --wait 0 package-busy -- true 2>/dev/null || status=$?
    [ "$status" = 0 ] || break
    sleep 0.05
  done
  wait "$holder"
  if [ "$status" != "$busy_code" ]; then
    echo "a second fencelock run on a held lock exited $status (the vectors say not_acquired is $busy_code)" >&2
    return 1
  fi
  echo "a held lock refused a second run (exit $status)"

  echo 0 >"$work/counter"
  : >"$work/log"
  local pids=()
  for _ in 1 2 3; do
    tests/interop/workers/worker.sh "$bin" "$url" package-cli 5 "$work/counter" "$work/log" 2>>"$work/stderr" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || { cat "$work/stderr" >&2; return 1; }; done
  exec {nodes[1]}>&-
  wait "$nodes_PID" || true
  [ "$(cat "$work/counter")" = 15 ] || { echo "3 x 5 locked increments left the counter at $(cat "$work/counter")" >&2; return 1; }
  # Lines are appended in the order the critical sections ran.
  awk 'NR > 1 && $2 <= last { bad = 1 } { last = $2 } END { exit bad }' "$work/log" \
    || { echo "fencing tokens did not strictly increase:" >&2; cat "$work/log" >&2; return 1; }
  echo "3 processes x 5 runs: counter 15, tokens $(awk '{ print $2 }' "$work/log" | paste -sd' ')"
}

case "$verb" in
  build) package_tarball "$dist" "$tarball" "$name" fill ;;
  test) test_installed ;;
  *) echo "usage: $0 build|test DIST" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Checks the protocol model (docs/model/fencelock.pml) with spin: the model
# of the protocol as it should be must pass both runs exhaustively, and each
# broken variant must be caught with the property it breaks. Prints the
# states and the time of every run. Installs spin from Debian's packages
# when it is missing (as scripts/ensure-deps.sh does), or prints SKIPPED
# and why when it cannot.
#
#   scripts/test-model.sh            every run
#   scripts/test-model.sh NAME...    only these runs (names as printed)
#   FENCELOCK_MODEL_KEEP=DIR         keep each run's pan output and trail in DIR
#   FENCELOCK_MODEL_JOBS=N           runs at once (default 2)
#   FENCELOCK_LONG=1                 also the long runs (scripts/test-long.sh):
#                                    the tokens run to 3 ticks, and with a
#                                    duplicated request (about 7 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
model=docs/model/fencelock.pml

if ! command -v spin >/dev/null 2>&1; then
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  if command -v apt-get >/dev/null 2>&1 && { [ -z "$sudo_cmd" ] || command -v sudo >/dev/null 2>&1; }; then
    echo "installing spin from Debian's packages (apt-get)…"
    $sudo_cmd apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends spin >/dev/null || true
  fi
fi
for tool in spin gcc; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "== SKIPPED protocol model: $tool is not installed and could not be installed (apt-get install spin gcc)"
    exit 0
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
keep=${FENCELOCK_MODEL_KEEP:-}
if [ -n "$keep" ]; then mkdir -p "$keep"; fi
failures=0
total_start=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# The bounds of the search (docs/model/README.md, "Constants", says why they
# are enough). Every broken variant runs with exactly the constants of the
# passing run it is a mutant of, so that the pass means something.
# P1: time unbounded, 2 requests that land after their operation.
P1_RUN=""
# P2: two full clients are a larger search; 2 ticks of time, no late request.
P2_RUN="-DTOKENS -DLATE=0 -DMAXTIME=2"
# A passing run that takes longer than this many seconds is stopped and
# reported INCOMPLETE.
run_limit=${FENCELOCK_MODEL_TIMEOUT:-$([ "${FENCELOCK_LONG:-0}" = 1 ] && echo 900 || echo 300)}

# Runs go two at a time (one per core; each search is single-threaded), and
# their lines are printed in the order they were asked for.
parallel=${FENCELOCK_MODEL_JOBS:-2}
names=()

# check NAME EXPECT SPIN_FLAGS...: starts the run in the background.
# EXPECT: pass (no error, search complete), P1 (two holders found) or
# P2 (a token not above the last one found).
check() {
  local name=$1
  if [ -n "${selected:-}" ] && [[ " $selected " != *" $name "* ]]; then return 0; fi
  while [ "$(jobs -pr | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  names+=("$name")
  mkdir -p "$work/$name"
  run_one "$@" >"$work/$name/line.txt" &
}

# run_one NAME EXPECT SPIN_FLAGS...: one run; prints its line, and "trail:" when kept.
run_one() {
  local name=$1 expect=$2
  shift 2
  local dir="$work/$name"
  mkdir -p "$dir"
  cp "$model" "$dir/"
  local start end out verdict states errors
  out="$dir/pan.txt"
  start=$(date +%s.%N)
  # Exhaustive: COLLAPSE compresses states losslessly; no bitstate, no hash
  # compaction. A depth or memory bound hit is reported as INCOMPLETE.
  if ( cd "$dir" &&
       spin "$@" -a fencelock.pml >spin.txt 2>&1 &&
       gcc -O2 -w -DSAFETY -DCOLLAPSE -DMEMLIM=6144 -o pan pan.c >gcc.txt 2>&1 ); then
    ( cd "$dir" && timeout "$run_limit" ./pan -m100000 -w25 >pan.txt 2>&1 ) || true
  else
    cat "$dir/spin.txt" "$dir/gcc.txt" >"$out" 2>/dev/null || true
    echo "spin or gcc failed" >>"$out"
  fi
  end=$(date +%s.%N)
  states=$(awk '/states, stored/ { print $1 }' "$out")
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out")
  if grep -q 'spin or gcc failed' "$out"; then
    verdict="FAILED: the model does not compile ($(grep -m1 -iE 'error' "$out" || true))"
  elif grep -qE 'max search depth too small|MEMLIM|out of memory' "$out"; then
    verdict="INCOMPLETE search (depth or memory bound hit)"
  elif [ -z "$errors" ]; then
    verdict="INCOMPLETE search (stopped after ${run_limit} s)"
  elif [ "$expect" = pass ]; then
    if [ "$errors" = 0 ]; then
      verdict=ok
    else
      verdict="FAILED: $(grep -m1 'assertion violated' "$out" || echo "errors: $errors")"
    fi
  else
    local pattern=
    case $expect in
      P1) pattern='assertion violated.*valid_left\[0\].*valid_left\[1\]' ;;
      P2) pattern='assertion violated.*fencing_token\[c\]>last_token' ;;
    esac
    if grep -qE "$pattern" "$out"; then
      verdict="ok (found the $expect violation)"
    else
      verdict="FAILED: expected a $expect violation, got errors: $errors"
    fi
  fi
  printf '%-22s %-5s %11s states %6s s  %s\n' "$name" "$expect" "${states:-?}" "$(elapsed "$start" "$end")" "$verdict"
  echo "$verdict" >"$dir/verdict.txt"
  if [ -n "$keep" ]; then
    mkdir -p "$keep/$name"
    cp "$out" "$keep/$name/"
    if [ -f "$dir/fencelock.pml.trail" ]; then
      cp "$dir/fencelock.pml" "$dir/fencelock.pml.trail" "$keep/$name/"
      echo "  trail: (cd $keep/$name && spin $* -t -p fencelock.pml)"
    fi
  fi
  return 0
}

selected="$*"
echo "spin: $(spin -V)"
printf '%-22s %-5s %18s %8s  %s\n' run want states time verdict
# The protocol as it should be: both runs pass.
check holders             pass  $P1_RUN
check tokens              pass  $P2_RUN
# Each broken variant is caught, with the constants of its passing run.
check nopersist-holders   P1    $P1_RUN -DRESTARTS_LOSE_STATE
check nopersist-tokens    P2    $P2_RUN -DRESTARTS_LOSE_STATE -DCHECK_HOLDERS=0
check old-extend          P1    $P1_RUN -DOLD_EXTEND_RULE
check decision-only       P1    $P1_RUN -DLOWER_AT_DECISION_ONLY
check spec-raise          P2    $P2_RUN -DSPEC_RAISE_RULE
check no-margin           P1    $P1_RUN -DMARGIN=0
# A request that runs twice (the behaviour before issue item 3's fix) breaks
# the lease rule of protocol.md §4.5, which needs at-most-once delivery.
check duplicates-holders  P1    $P1_RUN -DDUPLICATES=1
if [ "${FENCELOCK_LONG:-0}" = 1 ]; then
  # Tokens survive a duplicated request, and a third tick.
  check duplicates-tokens pass  $P2_RUN -DDUPLICATES=1
  check tokens-3-ticks    pass  -DTOKENS -DLATE=0 -DMAXTIME=3
fi
wait
for name in "${names[@]}"; do
  cat "$work/$name/line.txt"
  if [[ $(cat "$work/$name/verdict.txt" 2>/dev/null) != ok* ]]; then failures=$((failures + 1)); fi
done

echo "protocol model: $(elapsed "$total_start" "$(date +%s.%N)") s in all"
if [ "$failures" -gt 0 ]; then
  echo "protocol model: $failures run(s) did not give the expected result" >&2
  exit 1
fi
echo "protocol model: every run gave the expected result"

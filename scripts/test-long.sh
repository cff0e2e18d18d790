#!/usr/bin/env bash
# The long variants of the fault-injection suite (docs/reliability.md): the
# 60 s partition nemesis (proxy and network-namespace variants), 10^6
# tokens, the 60 s cargo-fuzz smoke per target where nightly and cargo-fuzz
# are installed (otherwise it says it is skipped), 50-run repeats of the
# crash, pause, restart and clock-jump tests, and 5,000 cases per property
# test, and the protocol model's long runs. Not part of CI; takes roughly 20-25 minutes on 2 cores. Every randomized test prints its seed;
# replay one with FENCELOCK_SEED=<seed> and the command it prints.
#
#   scripts/test-long.sh                 # every fault suite, long
#   scripts/test-long.sh faults_nemesis  # one suite, long
set -euo pipefail
cd "$(dirname "$0")/.."
FENCELOCK_DEPS_C=1 source scripts/ensure-deps.sh  # gcc builds the clockshift shim
suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
  suites=(faults_contention faults_tokens faults_lifecycle faults_netns faults_redlock faults_process faults_restart faults_clock faults_nemesis faults_fuzz)
fi
export FENCELOCK_LONG=1
tests/faults/fuzz/run.sh --check  # says whether T23's cargo fuzz runs or why it is skipped
for suite in "${suites[@]}"; do
  echo "== $suite (FENCELOCK_LONG=1)"
  cargo test -p fencelock --test "$suite" -- --test-threads=1 --nocapture
done
echo "== protocol model, long runs (FENCELOCK_LONG=1)"
scripts/test-model.sh
echo "== fault proxy and history checker"
cargo test -p fencelock-harness --lib -- --test-threads=1

#!/usr/bin/env bash
# T23: a cargo-fuzz smoke of every target (default 60 s each; the nightly
# job passes 600). Needs a nightly toolchain and cargo-fuzz; without them it
# says which is missing and exits 0 (skipped), as CI machines have neither.
#
#   tests/faults/fuzz/run.sh [seconds-per-target]
#   tests/faults/fuzz/run.sh --check   # only say whether it can run here
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "T23 cargo fuzz: SKIPPED, no nightly toolchain (rustup toolchain list)"; exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "T23 cargo fuzz: SKIPPED, cargo-fuzz is not installed (cargo install cargo-fuzz)"; exit 0
fi
if [ "$seconds" = --check ]; then
  echo "T23 cargo fuzz: nightly and cargo-fuzz present; faults_fuzz::t23_cargo_fuzz_smoke runs it"; exit 0
fi
for target in $(cargo +nightly fuzz list --fuzz-dir .); do
  echo "== cargo fuzz $target (${seconds} s)"
  cargo +nightly fuzz run --fuzz-dir . "$target" -- -max_total_time="$seconds"
done

#!/usr/bin/env bash
# Installs each package from dist/ (scripts/package.sh builds them) in a clean
# place with cargo and rustc off the PATH, and runs that front's tests against
# the installed copy:
#   scripts/test-packages.sh [FRONT...]    FRONT: c cli python node dotnet jvm go (default: all)
# The test harness (redis-nodes, which starts real redis-server nodes) is the
# one Rust program used here; it is built before Rust leaves the PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# (The C package is built against and tested with gcc, make and pkg-config.)
FENCELOCK_DEPS_C=1 source scripts/ensure-deps.sh
source scripts/package/common.sh

fronts=("$@")
[ ${#fronts[@]} -gt 0 ] || fronts=("${PACKAGE_FRONTS[@]}")
dist=$(package_dist)
[ -d "$dist" ] || { echo "test-packages: $dist is missing; run scripts/package.sh first" >&2; exit 1; }

echo "== cargo build -p fencelock-harness --bin redis-nodes"
cargo build -q -p fencelock-harness --bin redis-nodes
export FENCELOCK_REDIS_NODES="${CARGO_TARGET_DIR:-$root/target}/debug/redis-nodes"

# Rust leaves the PATH: every directory holding cargo or rustc is dropped,
# and stand-ins that fail loudly come first, for a copy in a system
# directory that cannot be dropped.
stand_ins=$(mktemp -d)
trap 'rm -rf "$stand_ins"' EXIT
for tool in cargo rustc rustup maturin; do
  printf '#!/bin/sh\necho "%s was called, but Rust is off the PATH for the package tests" >&2\nexit 127\n' \
    "$tool" >"$stand_ins/$tool"
  chmod +x "$stand_ins/$tool"
done
path_without_rust=$stand_ins
IFS=: read -ra path_entries <<<"$PATH"
for entry in "${path_entries[@]}"; do
  [ -n "$entry" ] || continue
  if [ -x "$entry/cargo" ] || [ -x "$entry/rustc" ]; then
    case "$entry" in /usr/bin | /bin) ;; *) continue ;; esac
  fi
  path_without_rust+=":$entry"
done
export PATH=$path_without_rust
unset CARGO RUSTC RUSTUP_TOOLCHAIN CARGO_HOME RUSTUP_HOME
if cargo --version >/dev/null 2>&1 || rustc --version >/dev/null 2>&1; then
  echo "test-packages: cargo or rustc is still callable" >&2
  exit 1
fi
echo "cargo and rustc are off the PATH"

failed=()
for front in "${fronts[@]}"; do
  echo "== $front package, installed from $dist"
  sandbox=$(mktemp -d "${TMPDIR:-/tmp}/fencelock-package-$front.XXXXXX")
  if FENCELOCK_SANDBOX=$sandbox "scripts/package/$front.sh" test "$dist"; then
    echo "-- $front package: ok"
  else
    echo "-- $front package: FAILED" >&2
    failed+=("$front")
  fi
  rm -rf "$sandbox"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test-packages: failed: ${failed[*]}" >&2
  exit 1
fi
echo "== every package installed and tested without Rust"

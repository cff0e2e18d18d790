#!/usr/bin/env bash
# Runs every test: formatting, lints, the protocol model, the Rust suites, the C ABI (plain,
# ASan/UBSan, valgrind), the Python, Node, .NET, JVM and Go fronts, the
# cross-language test, and the packages in dist/ installed without Rust, all
# against real redis-server processes (installing Debian packages that are missing).
set -euo pipefail
cd "$(dirname "$0")/.."
FENCELOCK_DEPS_C=1 source scripts/ensure-deps.sh
# A server with SET … IFEQ for the Rust suites (scripts/valkey-server.sh),
# built while the lints run.
mkdir -p target
setsid -w scripts/valkey-server.sh --tests >target/valkey-server.path 2>target/valkey-server.err &
valkey_build=$!
# A failed lint must not leave the build running (its own process group: make too).
trap 'kill -- -"$valkey_build" 2>/dev/null || true' EXIT
if cargo fmt --version >/dev/null 2>&1; then
  echo "== cargo fmt --check"
  cargo fmt --all -- --check
else
  echo "== SKIPPED cargo fmt: rustfmt is not installed (rustup component add rustfmt)"
fi
if cargo clippy --version >/dev/null 2>&1; then
  echo "== cargo clippy (all targets, warnings are errors)"
  cargo clippy --workspace --all-targets --quiet -- -D warnings
else
  echo "== SKIPPED cargo clippy: clippy is not installed (rustup component add clippy)"
fi
echo "== one feature set for every build (workspace-hack)"
scripts/check-feature-sets.py
if cargo hakari --version >/dev/null 2>&1; then
  cargo hakari generate --diff
  cargo hakari manage-deps --dry-run >/dev/null
else
  echo "(cargo-hakari is not installed, so workspace-hack/ was not compared with what it would generate:" \
    "cargo install --locked cargo-hakari)"
fi
echo "== protocol model (spin)"
scripts/test-model.sh
echo "== cargo test"
if wait "$valkey_build"; then
  FENCELOCK_VALKEY_SERVER="$(cat target/valkey-server.path)"
  export FENCELOCK_VALKEY_SERVER
else
  status=$?
  cat target/valkey-server.err >&2
  # Only a source gone from Debian's pool (75) lets the run go on.
  [ "$status" = 75 ] || exit "$status"
  echo "== SKIPPED the tests of re-takes by SET … IFEQ (core/tests/retakes.rs, on_valkey_*): no Valkey source to build"
fi
trap - EXIT
# One test at a time: the suites start their own Redis nodes and check timing
# bounds (loss detected within a renew interval), which a 2-core machine
# running several such tests at once would blur. The default members are the
# crates that build without Python or Node; their fronts have their own runs below.
cargo test -- --test-threads=1
echo "== C ABI"
tests/c/run.sh
# The Go front links the debug build of the C ABI that the C tests just
# made (a release build of it would add minutes to CI for nothing tested).
export FENCELOCK_GO_LIB_PROFILE=debug
for front in python node dotnet jvm go; do
  echo "== $front front"
  "scripts/test-$front.sh"
done
echo "== one lock, every language"
tests/interop/run.sh
echo "== packages (dist/): built, then installed and tested without Rust"
scripts/package.sh
scripts/test-packages.sh

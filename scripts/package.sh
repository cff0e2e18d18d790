#!/usr/bin/env bash
# Builds the packages a user installs without a Rust toolchain, into dist/
# (or $FENCELOCK_DIST):
#   scripts/package.sh [FRONT...]    FRONT: c cli python node dotnet jvm go (default: all)
# Each front's recipe is scripts/package/FRONT.sh: `build DIST` writes that
# front's artifacts into DIST; `test DIST` installs them in a clean place and
# runs the front's tests against the installed copy (scripts/test-packages.sh
# calls it with cargo and rustc off the PATH). Native code comes from release
# builds that share one toolchain, zig linking against glibc 2.17
# (scripts/package/toolchain.sh), and is stripped of debug information; only
# linux x86-64 (glibc) is built.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
source scripts/package/common.sh

fronts=("$@")
[ ${#fronts[@]} -gt 0 ] || fronts=("${PACKAGE_FRONTS[@]}")
for front in "${fronts[@]}"; do
  [ -x "scripts/package/$front.sh" ] || { echo "package: no front named '$front' (one of: ${PACKAGE_FRONTS[*]})" >&2; exit 2; }
done

dist=$(package_dist)
mkdir -p "$dist"
# The C ABI and the CLI in one cargo command, so tokio and redis are built once
# for both; the C tarball, the .NET and Go packages and the CLI take their
# files from it, and the other fronts' builds reuse its crates.
echo "== cargo build --release --target $FENCELOCK_HOST_TARGET -p fencelock-ffi -p fencelock-cli (zig, glibc $PACKAGE_GLIBC)"
with_zig cargo build -q --release --target "$FENCELOCK_HOST_TARGET" -p fencelock-ffi -p fencelock-cli
for front in "${fronts[@]}"; do
  echo "== package $front"
  "scripts/package/$front.sh" build "$dist"
done
(cd "$dist" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%P\n' | sort | xargs sha256sum >SHA256SUMS)
echo "== dist ($dist)"
(cd "$dist" && ls -l --time-style=+ | tail -n +2 | awk '{ printf "  %10s  %s\n", $5, $NF }')

#!/usr/bin/env bash
# Builds the packages a user installs without a Rust toolchain, into dist/
# (or $FENCELOCK_DIST):
#   scripts/package.sh [FRONT...]    FRONT: c cli python node dotnet jvm go (default: all)
#   scripts/package.sh --native-only only the release build below, which every
#                                    front's package takes its native code from
#                                    or reuses the crates of (scripts/test.sh
#                                    starts it early, at idle priority)
# Each front's recipe is scripts/package/FRONT.sh: `build DIST` writes that
# front's artifacts into DIST; `test DIST` installs them in a clean place and
# runs the front's tests against the installed copy (scripts/test-packages.sh
# calls it with cargo and rustc off the PATH). Native code comes from release
# builds that share one toolchain, zig linking against glibc 2.17
# (scripts/package/toolchain.sh), and is stripped of debug information; only
# linux x86-64 (glibc) is built.
set -euo pipefail
cd "$(dirname "$0")/.."

native_only=0
if [ "${1:-}" = --native-only ]; then
  [ $# = 1 ] || { echo "package: --native-only takes no front (it builds what every front's package needs)" >&2; exit 2; }
  native_only=1
  shift
fi
source scripts/ensure-deps.sh
source scripts/package/common.sh
fronts=("$@")
[ ${#fronts[@]} -gt 0 ] || fronts=("${PACKAGE_FRONTS[@]}")
for front in "${fronts[@]}"; do
  [ -x "scripts/package/$front.sh" ] || { echo "package: no front named '$front' (one of: ${PACKAGE_FRONTS[*]}; --native-only comes alone)" >&2; exit 2; }
done

# The C ABI, the CLI and the JVM library in one cargo command, so tokio and
# redis are built once for them; the C tarball, the .NET and Go packages and
# the CLI take their files from it, the JVM recipe finds its library built,
# and the wheel's and the Node addon's builds reuse its crates.
echo "== cargo build --release --target $FENCELOCK_HOST_TARGET -p fencelock-ffi -p fencelock-cli -p fencelock-jvm (zig, glibc $PACKAGE_GLIBC)"
with_zig cargo build -q --release --target "$FENCELOCK_HOST_TARGET" -p fencelock-ffi -p fencelock-cli -p fencelock-jvm
[ "$native_only" = 0 ] || exit 0
dist=$(package_dist)
mkdir -p "$dist"
for front in "${fronts[@]}"; do
  echo "== package $front"
  "scripts/package/$front.sh" build "$dist"
done
(cd "$dist" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%P\n' | sort | xargs sha256sum >SHA256SUMS)
echo "== dist ($dist)"
(cd "$dist" && ls -l --time-style=+ | tail -n +2 | awk '{ printf "  %10s  %s\n", $5, $NF }')

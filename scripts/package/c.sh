#!/usr/bin/env bash
# The C package: fencelock-c-VERSION-x86_64-linux-gnu.tar.gz, one directory
# holding include/fencelock.h, lib/libfencelock.{so,a} and
# lib/pkgconfig/fencelock.pc, whose prefix is relative to the .pc file
# (${pcfiledir}), so the tree works wherever it is unpacked.
#   scripts/package/c.sh build DIST | test DIST     (see scripts/package/common.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/package/common.sh
verb=$1 dist=$2
name="fencelock-c-$FENCELOCK_VERSION"
tarball="$name-x86_64-linux-gnu.tar.gz"

# The installed layout of scripts/install-c.sh, from the release build.
fill() {
  # shellcheck disable=SC2016 # ${pcfiledir} is for pkg-config to expand
  FENCELOCK_LIB_DIR=$FENCELOCK_RELEASE_DIR FENCELOCK_PC_PREFIX='${pcfiledir}/../..' \
    scripts/install-c.sh "$1" >/dev/null
  strip --strip-debug "$1/lib/libfencelock.so" "$1/lib/libfencelock.a"
  package_check_glibc "$1/lib/libfencelock.so" >&2
  cp examples/c/inventory.c "$1/"
}

# Unpacked in the sandbox: the pkg-config checks and the inventory example
# (shared and static), then the C test suite built against the unpacked
# header and library, and run on real nodes.
test_installed() {
  local archive prefix out
  archive=$(package_artifact "$dist" "$tarball")
  tar -C "$FENCELOCK_SANDBOX" -xzf "$archive"
  prefix="$FENCELOCK_SANDBOX/$name"
  out="$FENCELOCK_SANDBOX/out"
  tests/c/check-installed.sh "$prefix" "$out"
  make -s -C tests/c CPPFLAGS="-I$prefix/include" LIBDIR="$prefix/lib" OUT="$out"
  if ldd "$out/test_fencelock" | grep -F libfencelock.so | grep -vqF "$prefix/lib/"; then
    echo "the C tests did not load libfencelock.so from the package: $(ldd "$out/test_fencelock" | grep -F libfencelock)" >&2
    return 1
  fi
  FENCELOCK_VECTORS="$(pwd)/tests/vectors/protocol.json" FENCELOCK_EXAMPLE_INVENTORY="$out/inventory" \
    "$out/test_fencelock"
}

case "$verb" in
  build) package_tarball "$dist" "$tarball" "$name" fill ;;
  test) test_installed ;;
  *) echo "usage: $0 build|test DIST" >&2; exit 2 ;;
esac

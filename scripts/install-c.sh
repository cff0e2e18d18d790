#!/usr/bin/env bash
# Builds libfencelock and installs the C library, header and pkg-config file:
#   scripts/install-c.sh [PREFIX]        (default /usr/local; PROFILE=debug for a debug build)
# then: gcc app.c $(pkg-config --cflags --libs fencelock)
# scripts/package/c.sh uses it with FENCELOCK_LIB_DIR (install the libraries
# found there; build nothing) and FENCELOCK_PC_PREFIX (the prefix written in
# fencelock.pc, '${pcfiledir}/../..' for a tree that can be moved).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-/usr/local}
profile=${PROFILE:-release}
lib_dir=${FENCELOCK_LIB_DIR:-}
if [ -z "$lib_dir" ]; then
  if [ "$profile" = release ]; then
    source scripts/release-build.sh
    cargo build -q --release --target "$FENCELOCK_HOST_TARGET" -p fencelock-ffi
    lib_dir=$FENCELOCK_RELEASE_DIR
  else
    cargo build -q -p fencelock-ffi
    lib_dir="${CARGO_TARGET_DIR:-target}/debug"
  fi
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
install -d "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0644 include/fencelock.h "$prefix/include/"
install -m 0755 "$lib_dir/libfencelock.so" "$prefix/lib/"
install -m 0644 "$lib_dir/libfencelock.a" "$prefix/lib/"
pc_prefix=${FENCELOCK_PC_PREFIX:-$prefix}
sed -e "s|@PREFIX@|$pc_prefix|" -e "s|@VERSION@|$version|" ffi/fencelock.pc.in >"$prefix/lib/pkgconfig/fencelock.pc"
echo "installed fencelock $version (C API, from $lib_dir) into $prefix"

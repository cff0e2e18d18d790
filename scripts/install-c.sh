#!/usr/bin/env bash
# Builds libfencelock and installs the C library, header and pkg-config file:
#   scripts/install-c.sh [PREFIX]        (default /usr/local; PROFILE=debug for a debug build)
# then: gcc app.c $(pkg-config --cflags --libs fencelock)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-/usr/local}
profile=${PROFILE:-release}
if [ "$profile" = release ]; then
  cargo build -q --release -p fencelock-ffi
else
  cargo build -q -p fencelock-ffi
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
install -d "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0644 include/fencelock.h "$prefix/include/"
install -m 0755 "target/$profile/libfencelock.so" "$prefix/lib/"
install -m 0644 "target/$profile/libfencelock.a" "$prefix/lib/"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" ffi/fencelock.pc.in > "$prefix/lib/pkgconfig/fencelock.pc"
echo "installed fencelock $version (C API, $profile build) into $prefix"

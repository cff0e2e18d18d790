#!/usr/bin/env bash
# Builds libfencelock.a (cargo build --release -p fencelock-ffi, for the
# host's target triple as every release build: scripts/release-build.sh) and places
# it where the Go module links it from, as wasmtime-go and valkey-glide ship
# theirs: lib/GOOS-GOARCH/libfencelock.a, with the header in
# lib/include/fencelock.h. Neither is committed (.gitignore). The copy has
# its DWARF stripped (symbols stay), which keeps Go's links fast.
#   bindings/go/build-lib.sh            # release build (the default)
#   FENCELOCK_GO_LIB_PROFILE=debug bindings/go/build-lib.sh
set -euo pipefail
module=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$module/../.." && pwd)
profile=${FENCELOCK_GO_LIB_PROFILE:-release}
cd "$root"
if [ "$profile" = release ]; then
  source scripts/release-build.sh
  cargo build -q --release --target "$FENCELOCK_HOST_TARGET" -p fencelock-ffi
  target=$FENCELOCK_RELEASE_DIR
else
  cargo build -q -p fencelock-ffi
  target=${CARGO_TARGET_DIR:-$root/target}/debug
fi
platform="$(go env GOOS)-$(go env GOARCH)"
mkdir -p "$module/lib/$platform" "$module/lib/include"
# Write beside, then rename: a Go build reading the old copy never sees half a file.
cp "$target/libfencelock.a" "$module/lib/$platform/libfencelock.a.tmp"
strip --strip-debug "$module/lib/$platform/libfencelock.a.tmp" 2>/dev/null || true
mv -f "$module/lib/$platform/libfencelock.a.tmp" "$module/lib/$platform/libfencelock.a"
cp "$root/include/fencelock.h" "$module/lib/include/fencelock.h"
echo "libfencelock.a ($profile) and fencelock.h copied to bindings/go/lib/$platform"

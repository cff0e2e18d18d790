#!/usr/bin/env bash
# Checks an installed C layout (PREFIX/include, PREFIX/lib, PREFIX/lib/pkgconfig):
# pkg-config reports the workspace's version, and the inventory example links
# against it both as a shared and as a static library and runs on a real node.
#   tests/c/check-installed.sh PREFIX OUT_DIR
# Needs FENCELOCK_REDIS_NODES (the harness binary). Used by tests/c/run.sh for
# scripts/install-c.sh's layout and by scripts/package/c.sh for the tarball's.
set -euo pipefail
cd "$(dirname "$0")/../.."
prefix=$1 out=$2
: "${FENCELOCK_REDIS_NODES:?FENCELOCK_REDIS_NODES must name the harness binary (redis-nodes)}"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
found=$(pkg-config --modversion fencelock) || { echo "pkg-config finds no fencelock under $PKG_CONFIG_PATH" >&2; exit 1; }
[ "$found" = "$version" ] || { echo "pkg-config reports fencelock $found, the workspace is $version" >&2; exit 1; }
mkdir -p "$out"
# shellcheck disable=SC2046 # pkg-config output is meant to be split into flags
gcc -std=c11 -Wall -Werror examples/c/inventory.c $(pkg-config --cflags --libs fencelock) \
  -Wl,-rpath,"$(pkg-config --variable=libdir fencelock)" -o "$out/inventory-shared"
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Werror examples/c/inventory.c $(pkg-config --cflags fencelock) \
  "$(pkg-config --variable=libdir fencelock)/libfencelock.a" \
  $(pkg-config --libs-only-l --static fencelock | sed 's/-lfencelock//') -o "$out/inventory-static"
coproc nodes { "$FENCELOCK_REDIS_NODES" --nodes 1; }
read -r line <&"${nodes[0]}"
url=$(sed 's/.*"\(redis:[^"]*\)".*/\1/' <<<"$line")
for build in shared static; do
  FENCELOCK_NODES=$url "$out/inventory-$build" "pc-$build-$$" 2 | grep -q "stock of pc-$build-$$: 98" \
    || { echo "the $build build of the installed library did not work" >&2; exit 1; }
  echo "inventory example linked $build through pkg-config: ok"
done
exec {nodes[1]}>&-
wait "$nodes_PID"

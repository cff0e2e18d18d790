#!/usr/bin/env bash
# Builds a valkey-server that has `SET … IFEQ` and prints its path, for the
# tests and benches of what the core does only on such servers (re-takes by
# plain commands, docs/protocol.md §3.18). Debian bookworm's Redis is 7.0,
# which has no IFEQ, and Debian's valkey package with it (trixie's 8.1)
# needs a newer glibc than bookworm's, so this builds trixie's source of
# Valkey 8.1.1, checked against its pinned SHA-256, into target/ (reused by
# later runs). Needs curl, xz, make and a C compiler (scripts/ensure-deps.sh
# installs them).
#
#   scripts/valkey-server.sh          Valkey's own optimization, for benches
#   scripts/valkey-server.sh --tests  -O0, in a directory of its own: a
#                                     quarter of the build time, for tests
#                                     that count commands, not time them
#
# Exit status 75 (with the reason on stderr) only when Debian's pool answers
# that the source is not there (HTTP 404 or 410): the pool keeps one version
# of a release's source, so a point release that moves trixie to another
# upstream version takes this one away; update the pin then. Any other
# failure (network, checksum, build) is exit status 1.
set -euo pipefail
cd "$(dirname "$0")/.."
version=8.1.1+dfsg1
sha256=d9bbd82eecb82f359e649a0007ad3dc1b47cc15afa626348ca86b73c4ae2c7ee
url="https://deb.debian.org/debian/pool/main/v/valkey/valkey_${version}.orig.tar.xz"
dir="$PWD/target/valkey-$version"
optimization=()
case "${1:-}" in
  --tests)
    dir="$dir-tests"
    optimization=(OPTIMIZATION=-O0)
    ;;
  "") ;;
  *)
    echo "usage: $0 [--tests]" >&2
    exit 1
    ;;
esac
server="$dir/src/valkey-server"
if [ ! -x "$server" ]; then
  mkdir -p target
  tarball="target/valkey_${version}.orig.tar.xz"
  if [ ! -f "$tarball" ]; then
    status=$(curl -sSL --retry 3 -o "$tarball.part" -w '%{http_code}' "$url") || status=failed
    if [ "$status" != 200 ]; then
      rm -f "$tarball.part"
      case "$status" in
        404 | 410)
          echo "$url is gone from Debian's pool (HTTP $status): pin trixie's current Valkey in $0" >&2
          exit 75
          ;;
        *)
          echo "could not download $url (HTTP status: $status)" >&2
          exit 1
          ;;
      esac
    fi
    echo "$sha256  $tarball.part" | sha256sum --check --quiet
    mv "$tarball.part" "$tarball"
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  tar -xJf "$tarball" -C "$dir" --strip-components=1
  # libc's malloc: the bundled jemalloc would double the build for nothing
  # these tests measure; no TLS: they run on loopback.
  if ! make -C "$dir" -j"$(nproc)" MALLOC=libc BUILD_TLS=no "${optimization[@]}" valkey-server >"$dir.log" 2>&1; then
    tail -40 "$dir.log" >&2
    echo "building valkey-server failed; the whole log is in $dir.log" >&2
    exit 1
  fi
fi
echo "$server"

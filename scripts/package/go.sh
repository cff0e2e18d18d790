#!/usr/bin/env bash
# The Go package: the module github.com/fencelock/fencelock/bindings/go at
# vVERSION with its prebuilt static library (lib/linux-amd64/libfencelock.a
# and lib/include/fencelock.h, as bindings/go/build-lib.sh lays them out), as
#   DIST/fencelock-go-vVERSION.zip   the module zip, in Go's format
#   DIST/goproxy/                    a module proxy tree holding it, for
#                                    GOPROXY=file://…/dist/goproxy
#   scripts/package/go.sh build DIST | test DIST     (see scripts/package/common.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
source scripts/package/common.sh
verb=$1 dist=$2
module=$(sed -n 's/^module //p' bindings/go/go.mod)
version="v$FENCELOCK_VERSION"
zip_name="fencelock-go-$version.zip"
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi
export GOTOOLCHAIN=local

build() {
  local stage="$dist/.go-stage"
  rm -rf "$stage" "$dist/goproxy" "$dist/$zip_name"
  mkdir -p "$stage/lib/linux-amd64" "$stage/lib/include"
  # The module's tracked files (not a developer's local build output) and the
  # release library beside them.
  local file
  while IFS= read -r -d '' file; do
    install -D -m 0644 "$file" "$stage/${file#bindings/go/}"
  done < <(git ls-files -z bindings/go)
  strip --strip-debug -o "$stage/lib/linux-amd64/libfencelock.a" "$FENCELOCK_RELEASE_DIR/libfencelock.a"
  cp include/fencelock.h "$stage/lib/include/"
  python3 scripts/package/go_module_zip.py "$stage" "$module" "$version" "$dist/$zip_name" "$dist/goproxy"
  rm -rf "$stage"
  echo "$zip_name, goproxy/"
}

# A new module in the sandbox gets the package through GOPROXY=file://DIST/goproxy
# alone (no network proxy, no checksum database: it is not published), into a
# module cache of its own; then the module's own tests run from that cache
# and the inventory example builds against it and runs on real nodes.
test_installed() {
  package_artifact "$dist" "$zip_name" >/dev/null
  local app="$FENCELOCK_SANDBOX/app"
  export GOMODCACHE="$FENCELOCK_SANDBOX/gomodcache" GOPROXY="file://$dist/goproxy" GOSUMDB=off GOFLAGS=-mod=mod
  # The cache's files are read-only: make them removable for the sandbox's cleanup.
  trap 'chmod -R u+w "$GOMODCACHE" 2>/dev/null || true' RETURN
  mkdir -p "$app"
  cp examples/go/inventory.go "$app/"
  (cd "$app" && go mod init example.com/inventory >/dev/null 2>&1 && go get "$module@$version" && go build -o inventory .)
  local installed
  installed=$(cd "$app" && go list -m -f '{{.Dir}}' "$module")
  case "$installed" in
    "$GOMODCACHE"/*) echo "module from the package: ${installed#"$FENCELOCK_SANDBOX"/}" ;;
    *) echo "the module resolved to $installed, not to the package" >&2; return 1 ;;
  esac
  [ -f "$installed/lib/linux-amd64/libfencelock.a" ] || { echo "the module carries no lib/linux-amd64/libfencelock.a" >&2; return 1; }
  local log="$FENCELOCK_SANDBOX/go-test.log" status=0
  (cd "$app" && FENCELOCK_VECTORS="$root/tests/vectors/protocol.json" go test -count=1 -v "$module") >"$log" 2>&1 || status=$?
  grep -E '^\s*--- (FAIL|SKIP)' "$log" || true
  echo "go test $module: $(grep -c -- '--- PASS' "$log") passed, $(grep -c -- '--- FAIL' "$log") failed, $(grep -c -- '--- SKIP' "$log") skipped"
  [ "$status" = 0 ] || { tail -n 40 "$log" >&2; return "$status"; }
  examples/go/check.sh "$app/inventory"
}

case "$verb" in
  build) build ;;
  test) test_installed ;;
  *) echo "usage: $0 build|test DIST" >&2; exit 2 ;;
esac

# Shared by scripts/package.sh, scripts/test-packages.sh and the recipes in
# scripts/package/FRONT.sh (sourced, not run).
#
# A recipe is called as `scripts/package/FRONT.sh build DIST` or
# `scripts/package/FRONT.sh test DIST` from the repository root, with:
#   FENCELOCK_VERSION      the workspace version (Cargo.toml)
#   FENCELOCK_RELEASE_DIR  where the release build put libfencelock.{so,a} and fencelock
#                          (scripts/release-build.sh)
# and, for `test` only:
#   FENCELOCK_SANDBOX      an empty directory of its own, removed afterwards
#   FENCELOCK_REDIS_NODES  the harness binary that starts real redis-server nodes
#   PATH                   without cargo or rustc: a recipe that tries to build
#                          Rust code fails loudly

# Every front, in the order they are built and tested.
PACKAGE_FRONTS=(c cli python node dotnet jvm go)

FENCELOCK_VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
export FENCELOCK_VERSION
source scripts/release-build.sh
source scripts/package/toolchain.sh

# The absolute path of the packages' directory.
package_dist() {
  realpath -m "${FENCELOCK_DIST:-dist}"
}

# The one artifact in DIST that matches a glob, or a clear error.
package_artifact() {
  local dist=$1 pattern=$2 found
  found=$(compgen -G "$dist/$pattern" | head -n 2)
  if [ -z "$found" ]; then
    echo "no $pattern in $dist: run scripts/package.sh first" >&2
    return 1
  fi
  if [ "$(wc -l <<<"$found")" -gt 1 ]; then
    echo "more than one $pattern in $dist; remove the stale one" >&2
    return 1
  fi
  printf '%s\n' "$found"
}

# Packs the directory NAME, which the function FILL fills (it is given the
# directory's path), as DIST/TARBALL, owned by root, and prints TARBALL.
package_tarball() {
  local dist=$1 tarball=$2 name=$3 fill=$4 stage
  stage=$(mktemp -d)
  mkdir "$stage/$name"
  "$fill" "$stage/$name"
  tar -C "$stage" --owner=0 --group=0 -czf "$dist/$tarball" "$name"
  rm -rf "$stage"
  echo "$tarball"
}

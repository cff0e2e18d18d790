#!/usr/bin/env bash
# The Python package: a manylinux abi3 wheel (CPython 3.9 and later, one
# wheel for all), built by maturin and checked by auditwheel.
#   scripts/package/python.sh build DIST | test DIST     (see scripts/package/common.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/package/common.sh
verb=$1 dist=$2
# The oldest glibc the wheel promises to run on is the packages' (manylinux2014:
# RHEL 7, Ubuntu 18.04, Debian 10 and later): the extension is linked by zig
# like every package's native code (scripts/package/toolchain.sh), and
# auditwheel checks the result.
manylinux=manylinux_${PACKAGE_GLIBC/./_}
wheel_glob="fencelock-$FENCELOCK_VERSION-cp39-abi3-*${manylinux}_x86_64.whl"

build() {
  local venv wheel
  venv=$(package_tools_venv)
  rm -f "$dist"/fencelock-*.whl
  # The release build for the host's triple (not maturin --zig, whose zig
  # wrapper would be another linker to cargo): only pyo3 and the extension
  # compile here; the rest comes from scripts/package.sh's build.
  PATH="$venv/bin:$PATH" with_zig "$venv/bin/maturin" build --quiet --release --strip \
    --target "$FENCELOCK_HOST_TARGET" --compatibility "$manylinux" \
    --manifest-path bindings/python/Cargo.toml --out "$dist" >&2
  wheel=$(package_artifact "$dist" "$wheel_glob")
  # auditwheel reads the wheel's ELF files: which glibc symbol versions and
  # which libraries it needs. It must fit the tag maturin gave it.
  local report
  report=$("$venv/bin/auditwheel" show "$wheel" | tr -s ' \n' ' ')
  if ! grep -qF "is consistent with the following platform tag: \"${manylinux}_x86_64\"" <<<"$report"; then
    echo "auditwheel: $(basename "$wheel") is not consistent with $manylinux: $report" >&2
    return 1
  fi
  echo "auditwheel: consistent with ${manylinux}_x86_64" >&2
  basename "$wheel"
}

# A fresh virtualenv in the sandbox, the wheel installed from DIST (no source
# build can happen: Rust is off the PATH and pip is given only the wheel),
# then the front's pytest suite and its examples, run from the repository but
# importing the installed package.
test_installed() {
  local wheel venv py location profile
  wheel=$(package_artifact "$dist" "$wheel_glob")
  venv="$FENCELOCK_SANDBOX/venv"
  python3 -m venv "$venv"
  py="$venv/bin/python"
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  "$py" -m pip install -q --only-binary=:all: "$wheel"
  "$py" -m pip install -q -r bindings/python/requirements-test.txt
  location=$(cd "$FENCELOCK_SANDBOX" && "$py" -c 'import fencelock._native as n; print(n.__file__)')
  case "$location" in
    "$venv"/*) echo "fencelock imported from the installed wheel: ${location#"$FENCELOCK_SANDBOX"/}" ;;
    *) echo "fencelock was imported from $location, not from the installed wheel" >&2; return 1 ;;
  esac
  profile=$(cd "$FENCELOCK_SANDBOX" && "$py" -c 'import fencelock._native as n; print(getattr(n, "_build_profile", "unrecorded"))')
  [ "$profile" = release ] || { echo "the wheel holds a $profile build, not a release build" >&2; return 1; }
  # From bindings/python, as scripts/test-python.sh runs it: the sources are
  # in bindings/python/python, which is not on sys.path, so `import fencelock`
  # is the installed package.
  (cd bindings/python && "$py" -m pytest -q -p no:cacheprovider tests)
  for example in inventory cron_once web_handler; do
    # (Their nodes run without AOF; fencelock's warning about it is kept for a failure.)
    "$py" "examples/python/$example.py" >/dev/null 2>"$FENCELOCK_SANDBOX/example.err" \
      || { cat "$FENCELOCK_SANDBOX/example.err" >&2; echo "examples/python/$example.py failed" >&2; return 1; }
  done
  echo "examples/python: inventory, cron_once, web_handler ran"
}

case "$verb" in
  build) build ;;
  test) test_installed ;;
  *) echo "usage: $0 build|test DIST" >&2; exit 2 ;;
esac

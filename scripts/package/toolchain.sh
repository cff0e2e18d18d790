# The packages' build tools and their one release toolchain (sourced by
# scripts/package/common.sh, not run).
#
# Every package's native code (the C library, the CLI, the wheel's extension,
# the Node addon, the .NET, JVM and Go libraries) comes from release builds
# for the host's triple (scripts/release-build.sh) that share one toolchain
# and so one set of compiled crates, linked against glibc
# $PACKAGE_GLIBC whatever glibc this machine has: zig compiles ring's C and
# assembly and links, through cargo-zigbuild's `zig cc` front, which turns
# the flags rustc and the cc crate pass into zig's.
#
# One toolchain for all of them because cargo fingerprints the linker, and
# the cc crate the C compiler: a package built with another pair would
# compile ring and everything above it (rustls, redis, tokio-postgres, the
# core) once more, minutes on 2 cores (docs/performance.md, "The test run's
# time: one toolchain for every package").

# The newest glibc symbol version a package may reference: manylinux2014's
# floor (RHEL 7, Ubuntu 18.04, Debian 10 and later).
PACKAGE_GLIBC=2.17

# The repository's root, read once: the functions below run from any folder.
PACKAGE_TOOLCHAIN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The pinned tools: maturin, auditwheel, zig, cargo-zigbuild.
PACKAGE_TOOLS_LIST=$PACKAGE_TOOLCHAIN_ROOT/scripts/package/requirements.txt

# The target directory as an absolute path: the cc crate runs the C compiler
# from each crate's own folder.
package_target_dir() {
  realpath -m "${CARGO_TARGET_DIR:-$PACKAGE_TOOLCHAIN_ROOT/target}"
}

# The tools' virtualenv ($PACKAGE_TOOLS_LIST); prints its path. Installed
# again whenever the pinned list changes (a copy of the list marks what is
# installed).
package_tools_venv() {
  local venv
  venv="$(package_target_dir)/package-venv"
  if ! cmp -s "$PACKAGE_TOOLS_LIST" "$venv/requirements.txt"; then
    python3 -m venv "$venv" >&2
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install -q -r "$PACKAGE_TOOLS_LIST" >&2
    cp "$PACKAGE_TOOLS_LIST" "$venv/requirements.txt"
  fi
  printf '%s\n' "$venv"
}

# Runs one command with zig as the C compiler and linker of the host's triple:
#   with_zig cargo build --release --target "$FENCELOCK_HOST_TARGET" ...
# Only for that command: a build without --target targets the same triple, so
# a debug build given these variables would stop sharing target/debug with
# the tests' builds.
with_zig() {
  local venv zig_version wrapper zig_target env_target
  case "$FENCELOCK_HOST_TARGET" in
    *-unknown-linux-gnu) ;;
    *)
      echo "packages are built for Linux with glibc only, and this machine is $FENCELOCK_HOST_TARGET" >&2
      return 1
      ;;
  esac
  venv=$(package_tools_venv)
  zig_target="${FENCELOCK_HOST_TARGET%%-*}-linux-gnu.$PACKAGE_GLIBC"
  # cargo takes a linker as one program, so the flags live in a script. Its
  # path stays the same from run to run, as the fingerprints need, and names
  # zig's version, so that another zig compiles ring's C again. Zig finds its
  # own glibc for -target; no sanitizer runtime is linked (zig cc turns UBSan
  # on in C builds without optimization); -g keeps the debug information for
  # the packages' own strip.
  zig_version=$(sed -n 's/^ziglang==//p' "$PACKAGE_TOOLS_LIST")
  wrapper="$(package_target_dir)/zig-toolchain/zig-$zig_version-cc-$zig_target"
  mkdir -p "$(dirname "$wrapper")"
  cat >"$wrapper.new" <<EOF
#!/bin/sh
# zig cc for $zig_target (scripts/package/toolchain.sh)
CARGO_ZIGBUILD_PYTHON_PATH='$venv/bin/python' exec '$venv/bin/cargo-zigbuild' zig cc -- -g -fno-sanitize=all -target $zig_target "\$@"
EOF
  if cmp -s "$wrapper.new" "$wrapper"; then
    rm "$wrapper.new"
  else
    chmod +x "$wrapper.new"
    mv "$wrapper.new" "$wrapper"
  fi
  env_target=${FENCELOCK_HOST_TARGET//-/_}
  env "CC_$env_target=$wrapper" "CARGO_TARGET_${env_target^^}_LINKER=$wrapper" "$@"
}

# Fails unless the ELF file needs glibc $PACKAGE_GLIBC at most: the highest
# GLIBC_ symbol version it references, as auditwheel reads it for the wheel.
package_check_glibc() {
  local file=$1 newest
  newest=$(objdump -T "$file" | { grep -o 'GLIBC_[0-9][0-9.]*' || true; } | sed 's/^GLIBC_//' | sort -uV | tail -1)
  if [ -z "$newest" ]; then
    echo "$file references no versioned glibc symbol: is it a dynamically linked Linux binary?" >&2
    return 1
  fi
  if [ "$(printf '%s\n%s\n' "$newest" "$PACKAGE_GLIBC" | sort -V | tail -1)" != "$PACKAGE_GLIBC" ]; then
    echo "$(basename "$file") needs glibc $newest, newer than the packages' floor $PACKAGE_GLIBC:" \
      "was it built outside with_zig (scripts/package/toolchain.sh)?" >&2
    return 1
  fi
  echo "$(basename "$file"): needs glibc $newest or later (its newest versioned glibc symbol)"
}

# Where the scripts' release builds go (sourced, not run): every release
# build names the host's target triple, as `cargo build --release --target
# "$FENCELOCK_HOST_TARGET"`, and so writes to $FENCELOCK_RELEASE_DIR.
#
# Why: the napi-rs CLI always passes `--target` when it builds the Node
# addon, and cargo keeps the crates of a `--target` build apart from those of
# a build without one (target/TRIPLE/release, not target/release). Were the
# other release builds (the C ABI and the CLI, the Go and JVM libraries)
# made without it, tokio, redis, rustls and the core would compile twice per
# test run. For the same reason no release build sets RUSTFLAGS: the Node
# addon is stripped after its build (bindings/node/build.js).
#
# The packages' builds (scripts/package.sh and its recipes) also name one
# linker and C compiler, zig for glibc 2.17 (with_zig in
# scripts/package/toolchain.sh), which cargo fingerprints: they share their
# crates with each other and with scripts/demo.sh's, not with a release
# build made without with_zig (bindings/node/build.js, the Node package's
# "prepare" that `npm install` runs there; bindings/go/build-lib.sh;
# scripts/install-c.sh by default), which compiles them again, in the same
# directory, so that the next package build compiles them once more.
#
#   FENCELOCK_HOST_TARGET  the host's triple (rustc -vV), e.g. x86_64-unknown-linux-gnu;
#                          set already, it is kept (scripts/test-packages.sh runs
#                          the package recipes with rustc off the PATH)
#   FENCELOCK_RELEASE_DIR  where the release builds' libraries and programs are
# Both are exported.
if [ -z "${FENCELOCK_HOST_TARGET:-}" ]; then
  FENCELOCK_HOST_TARGET=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p' || true)
  if [ -z "$FENCELOCK_HOST_TARGET" ]; then
    echo "could not read the host's target triple from \`rustc -vV\`; is Rust installed?" >&2
    exit 1
  fi
fi
FENCELOCK_RELEASE_DIR=${CARGO_TARGET_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target}/$FENCELOCK_HOST_TARGET/release
export FENCELOCK_HOST_TARGET FENCELOCK_RELEASE_DIR

#!/usr/bin/env bash
# The Node packages, laid out as napi-rs lays them out:
#   fencelock-linux-x64-gnu-VERSION.tgz  the platform package: the prebuilt
#       addon (a release build, stripped) and bindings/node/npm/linux-x64-gnu/package.json
#       (written by `napi create-npm-dirs`: os linux, cpu x64, libc glibc)
#   fencelock-VERSION.tgz  the JavaScript package: index.js, lib/, the
#       napi-rs loader native.js, the typings; no Rust sources, no .node file,
#       no build script; it names the platform package in optionalDependencies,
#       so npm installs the one that fits the machine and native.js loads it.
#   scripts/package/node.sh build DIST | test DIST     (see scripts/package/common.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
source scripts/package/common.sh
verb=${1:-} dist=${2:-}
[ -n "$dist" ] || { echo "usage: $0 build|test DIST" >&2; exit 2; }
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

pkg=$root/bindings/node
platform=linux-x64-gnu
addon=fencelock.$platform.node
main_tgz="fencelock-$FENCELOCK_VERSION.tgz"
platform_tgz="fencelock-$platform-$FENCELOCK_VERSION.tgz"

fail() {
  echo "node package: $*" >&2
  exit 1
}

build() {
  local version
  version=$(node -p "require('$pkg/package.json').version")
  [ "$version" = "$FENCELOCK_VERSION" ] ||
    fail "bindings/node/package.json is at $version but Cargo.toml at $FENCELOCK_VERSION; set the same version in package.json, then run (cd bindings/node && npx napi create-npm-dirs && npm run build) and commit npm/ and native.js"
  # A fresh checkout has no devDependencies (the napi-rs CLI): --ignore-scripts
  # so "prepare" does not build here as well as below, --no-save so a lock
  # npm would write differently (the mirror lags on optional packages) does
  # not change the checkout.
  if [ ! -x "$pkg/node_modules/.bin/napi" ]; then
    echo "npm install (bindings/node devDependencies)"
    (cd "$pkg" && npm install --ignore-scripts --no-save --no-audit --no-fund >/dev/null) ||
      fail "npm install in bindings/node failed (above); the napi-rs CLI is needed to build the addon"
  fi
  # `napi build --release`, then strip (build.js): writes the addon, and
  # regenerates native.js with this version in its platform-package check,
  # and the typings native.d.ts from the Rust sources.
  (cd "$pkg" && with_zig node build.js)
  [ -f "$pkg/$addon" ] || fail "the build wrote no bindings/node/$addon"
  # build.js only warns when it cannot strip; a package must not carry the symbols.
  if readelf -S "$pkg/$addon" | grep -F .symtab >/dev/null; then
    fail "bindings/node/$addon still has its symbols: build.js could not strip it (is binutils' strip installed?)"
  fi
  package_check_glibc "$pkg/$addon"
  # The Node front's tests run on an addon built by cargo alone
  # (scripts/test-node.sh), so this build is the one that regenerates the
  # committed loader and typings; from a checkout they must not have changed.
  if git -C "$pkg" rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
    ! git -C "$pkg" diff --exit-code -- native.js native.d.ts >&2; then
    fail "the build changed bindings/node/native.js or native.d.ts (above), which are committed: commit what it wrote"
  fi
  grep -qF "expected $FENCELOCK_VERSION but got" "$pkg/native.js" ||
    fail "bindings/node/native.js does not expect platform packages at $FENCELOCK_VERSION; rebuild it with (cd bindings/node && npm run build)"

  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  # The platform package: napi-rs writes its package.json from the "napi"
  # field and the version of bindings/node/package.json. It is committed
  # (bindings/node/npm), and written here again to catch a stale copy; in
  # the stage, as napi writes only below the package.json it reads.
  cp "$pkg/package.json" "$stage/"
  local said
  said=$("$pkg/node_modules/.bin/napi" create-npm-dirs --cwd "$stage" 2>&1) ||
    fail "napi create-npm-dirs failed: $said"
  diff -r "$pkg/npm/$platform" "$stage/npm/$platform" >&2 ||
    fail "bindings/node/npm/$platform differs from what napi writes (above); run (cd bindings/node && npx napi create-npm-dirs) and commit it"
  cp "$pkg/$addon" "$stage/npm/$platform/"
  (cd "$stage/npm/$platform" && npm pack --ignore-scripts --loglevel=warn --pack-destination "$dist" >/dev/null)

  # The JavaScript package, packed from a staged copy whose package.json
  # drops what only a build from source needs.
  mkdir "$stage/fencelock"
  node - "$pkg/package.json" "$stage/fencelock/package.json" "fencelock-$platform" <<'EOF'
const fs = require('node:fs')
const [source, destination, platformPackage] = process.argv.slice(2)
const manifest = JSON.parse(fs.readFileSync(source, 'utf8'))
// The scripts build and test from a checkout ("prepare" would run cargo on the
// user's machine); the devDependencies are the tools for that.
delete manifest.scripts
delete manifest.devDependencies
const sourceOnly = new Set(['*.node', 'Cargo.toml', 'build.rs', 'src', 'build.js'])
manifest.files = manifest.files.filter((entry) => !sourceOnly.has(entry))
for (const entry of manifest.files) {
  if (/[*?[]/.test(entry)) throw new Error(`package.json "files" has the pattern ${entry}; node.sh copies plain names only`)
}
manifest.optionalDependencies = { [platformPackage]: manifest.version }
fs.writeFileSync(destination, JSON.stringify(manifest, null, 2) + '\n')
EOF
  local entry
  while read -r entry; do
    cp -r "$pkg/$entry" "$stage/fencelock/"
  done < <(node -p "require('$stage/fencelock/package.json').files.join('\n')")
  cp "$pkg/README.md" "$stage/fencelock/"
  (cd "$stage/fencelock" && npm pack --ignore-scripts --loglevel=warn --pack-destination "$dist" >/dev/null)

  # What the tarballs hold, checked rather than trusted to "files".
  local listed
  listed=$(tar -tzf "$dist/$main_tgz")
  if grep -E '\.node$|^package/(src/|Cargo\.toml|build\.rs|build\.js)' <<<"$listed" >&2; then
    fail "$main_tgz holds the files above, which belong to a build from source"
  fi
  grep -qx package/native.js <<<"$listed" || fail "$main_tgz has no native.js"
  tar -xOzf "$dist/$main_tgz" package/package.json |
    node -e "const m = JSON.parse(require('fs').readFileSync(0, 'utf8')); if (m.optionalDependencies?.['fencelock-$platform'] !== '$FENCELOCK_VERSION' || m.scripts) process.exit(1)" ||
    fail "$main_tgz: package.json must name fencelock-$platform $FENCELOCK_VERSION in optionalDependencies and have no scripts"
  tar -tzf "$dist/$platform_tgz" | grep -qx "package/$addon" || fail "$platform_tgz has no $addon"
  echo "$main_tgz"
  echo "$platform_tgz"
}

test_installed() {
  local main_archive platform_archive project
  main_archive=$(package_artifact "$dist" "$main_tgz")
  platform_archive=$(package_artifact "$dist" "$platform_tgz")
  command -v node >/dev/null && command -v npm >/dev/null || fail "node and npm are required (Node >= 20.17)"
  # native.js loads a platform package of another version without a word
  # unless this is set; then it refuses it ("version mismatch").
  export NAPI_RS_ENFORCE_VERSION_CHECK=1
  unset NAPI_RS_NATIVE_LIBRARY_PATH

  # The sandbox mirrors the repository's layout, so the copied suite and
  # example find what they read from it (helpers.js, tests/vectors) where they
  # look, while 'fencelock' resolves to the project's node_modules:
  #   package.json, node_modules/     a user's project with the packages installed
  #   bindings/node/test/             the suite (the package itself is not there)
  #   examples/node/                  the example
  #   tests/vectors/protocol.json     the shared vectors
  project=$(realpath "$FENCELOCK_SANDBOX") # real paths, as require.resolve answers
  dev() { node -p "require('$pkg/package.json').devDependencies['$1']"; }
  cat >"$project/package.json" <<'EOF'
{ "name": "fencelock-package-test", "private": true }
EOF
  # Both tarballs in one command: npm takes the platform package from its
  # tarball (a top-level dependency of the project), and fencelock's
  # optionalDependency on it is then met by that copy, never fetched from the
  # registry (which does not have it). prom-client, TypeScript and the Node
  # typings are what the suite uses besides fencelock.
  echo "npm install $main_tgz $platform_tgz"
  (cd "$project" && npm install --no-audit --no-fund "$main_archive" "$platform_archive" \
    "prom-client@$(dev prom-client)" "typescript@$(dev typescript)" "@types/node@$(dev @types/node)") ||
    fail "npm install of the tarballs failed (above)"

  # No build ran, and the addon is the platform package's prebuilt one.
  local installed=$project/node_modules/fencelock nodes unpacked
  [ -f "$project/node_modules/fencelock-$platform/$addon" ] ||
    fail "node_modules/fencelock-$platform/$addon is missing: npm did not install the platform package"
  nodes=$(find "$project" -name '*.node' -type f)
  [ "$nodes" = "$project/node_modules/fencelock-$platform/$addon" ] ||
    fail "expected one .node file, the platform package's; found: ${nodes:-none}"
  unpacked=$project/unpacked
  mkdir "$unpacked"
  tar -C "$unpacked" -xzf "$platform_archive" "package/$addon"
  cmp -s "$unpacked/package/$addon" "$project/node_modules/fencelock-$platform/$addon" ||
    fail "the installed $addon is not the one in $platform_tgz"
  rm -rf "$unpacked"
  [ ! -e "$installed/src" ] && [ ! -e "$installed/Cargo.toml" ] && [ ! -e "$project/target" ] ||
    fail "Rust sources or a cargo target directory in the sandbox"
  (cd "$project" && node - "$FENCELOCK_VERSION" "fencelock-$platform" <<'EOF') || fail "fencelock did not load the platform package's addon (above)"
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const [version, platformPackage] = process.argv.slice(2)
const fencelock = require('fencelock')
const installed = path.dirname(require.resolve('fencelock/package.json'))
const expected = fs.realpathSync(require.resolve(platformPackage, { paths: [installed] }))
assert.equal(expected, path.join(fs.realpathSync('node_modules'), platformPackage, path.basename(expected)))
const loaded = Object.keys(require.cache).filter((file) => file.endsWith('.node'))
assert.deepEqual(loaded, [expected], 'the addon loaded')
assert.equal(fencelock.VERSION, version)
// (native.js is not in the package's "exports": reached by its path.)
assert.equal(require(path.join(installed, 'native.js')).BUILD_PROFILE, 'release', 'the addon is a release build')
console.log(`fencelock ${fencelock.VERSION} loaded ${path.relative(process.cwd(), expected)}, a release build`)
EOF
  # Without its platform package, fencelock must refuse to load and say why.
  local missing
  missing=$(cd "$project" && node -e "
const Module = require('node:module')
const resolve = Module._resolveFilename
Module._resolveFilename = function (request, ...rest) {
  if (request.startsWith('fencelock-$platform')) throw Object.assign(new Error('hidden'), { code: 'MODULE_NOT_FOUND' })
  return resolve.call(this, request, ...rest)
}
try { require('fencelock'); console.log('loaded') } catch (error) { console.log(error.message) }" 2>&1)
  grep -q 'Cannot find native binding' <<<"$missing" ||
    fail "with fencelock-$platform hidden, require('fencelock') said: $missing"
  echo "without fencelock-$platform: $(head -c 60 <<<"$missing")…"

  # The suite, against the installed package and real redis-server nodes.
  mkdir -p "$project/bindings/node" "$project/tests/vectors" "$project/examples"
  cp -r "$pkg/test" "$project/bindings/node/test"
  rm -rf "$project/bindings/node/test/ts/out"
  cp "$root/tests/vectors/protocol.json" "$project/tests/vectors/"
  local resolved
  resolved=$(cd "$project/bindings/node/test" && node -p "require('./helpers.js').PACKAGE")
  [ "$resolved" = "$installed" ] || fail "the copied suite would test $resolved, not $installed"
  echo "node --test (bindings/node/test, against $installed)"
  (cd "$project/bindings/node" && node --test --test-concurrency=1 test/*.test.js) ||
    fail "the Node test suite failed against the installed package (above)"

  echo "example (examples/node)"
  mkdir "$project/examples/node"
  cp "$root"/examples/node/*.js "$project/examples/node/"
  (cd "$project/examples/node" && node demo.js) || fail "the example failed against the installed package (above)"
}

case "$verb" in
  build) build ;;
  test) test_installed ;;
  *)
    echo "usage: $0 build|test DIST" >&2
    exit 2
    ;;
esac

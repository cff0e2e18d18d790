#!/usr/bin/env bash
# Installs the Python, Node, .NET, JVM and Go fronts from the packages in
# dist/ (building a package with scripts/package.sh when it is missing) into
# DEST, with each front's interop worker, for the demo's last scene:
#   scripts/install-fronts.sh DEST
# then FENCELOCK_INTEROP_FRONTS=DEST tests/interop/interop.py --in-turn … runs
# the installed fronts. A front whose language is not installed here (python3,
# node and npm, mono and mcs, java and mvn, go) is skipped with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/ensure-deps.sh
source scripts/package/common.sh
dest=$(realpath -m "$1")
dist=$(package_dist)
mkdir -p "$dest"
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi

# The package of FRONT matching GLOB in dist/, built when missing.
package() {
  local front=$1 glob=$2
  compgen -G "$dist/$glob" >/dev/null || scripts/package.sh "$front" >&2
  package_artifact "$dist" "$glob"
}

# True when every tool named is on the PATH; otherwise says which is missing.
have() {
  local front=$1 tool
  shift
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "   $front: skipped ($tool is not installed)"
      return 1
    fi
  done
}

install_python() {
  local wheel venv="$dest/python/venv"
  wheel=$(package python "fencelock-$FENCELOCK_VERSION-*.whl")
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  # redis-py runs the protocol's independent implementation beside the front.
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel"
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install -q "$(grep '^redis==' bindings/python/requirements-test.txt)"
}

install_node() {
  local platform main
  platform=$(package node "fencelock-linux-x64-gnu-$FENCELOCK_VERSION.tgz")
  main=$(package node "fencelock-$FENCELOCK_VERSION.tgz")
  mkdir -p "$dest/node"
  (cd "$dest/node" && [ -f package.json ] || echo '{"private": true}' >package.json)
  (cd "$dest/node" && npm install -q --no-audit --no-fund --no-save "$platform" "$main" >/dev/null)
}

install_dotnet() {
  local nupkg out="$dest/dotnet"
  nupkg=$(package dotnet "FenceLock.$FENCELOCK_VERSION.nupkg")
  rm -rf "$out" && mkdir -p "$out"
  # What a NuGet consumer gets: the assembly from lib/ and, beside it, the
  # native library from runtimes/linux-x64/native/.
  python3 - "$nupkg" "$out" <<'EOF'
import sys, zipfile
from pathlib import PurePosixPath
nupkg, out = sys.argv[1:]
with zipfile.ZipFile(nupkg) as package:
    for name in package.namelist():
        path = PurePosixPath(name)
        if (path.parts[0] == "lib" and path.name == "FenceLock.dll") or name == "runtimes/linux-x64/native/libfencelock.so":
            with open(f"{out}/{path.name}", "wb") as target:
                target.write(package.read(name))
EOF
  mcs -target:exe -out:"$out/InteropWorker.exe" -r:"$out/FenceLock.dll" tests/interop/workers/Worker.cs >/dev/null
}

install_jvm() {
  local jar pom out="$dest/jvm"
  jar=$(package jvm "fencelock-$FENCELOCK_VERSION.jar")
  pom=$(package jvm "fencelock-$FENCELOCK_VERSION.pom")
  mkdir -p "$out"
  # The jar's dependencies as its POM lists them, from Maven Central.
  mvn -q -B -ntp -Dstyle.color=never -f "$pom" dependency:build-classpath -Dmdep.outputFile="$out/dependencies.txt" \
    -DincludeScope=runtime >"$out/mvn.log" 2>&1 || { cat "$out/mvn.log" >&2; return 1; }
  echo "$jar:$(cat "$out/dependencies.txt")" >"$out/classpath.txt"
}

install_go() {
  local out="$dest/go" module
  package go "fencelock-go-v$FENCELOCK_VERSION.zip" >/dev/null
  module=$(sed -n 's/^module //p' bindings/go/go.mod)
  rm -rf "$out/src" && mkdir -p "$out/src"
  cp tests/interop/workers/go/*.go "$out/src/"
  # The worker's module without its `replace` of the repository's copy: the
  # front comes from dist/goproxy.
  (cd "$out/src" && export GOTOOLCHAIN=local GOPROXY="file://$dist/goproxy" GOSUMDB=off GOFLAGS=-mod=mod \
    && go mod init example.com/interop-worker >/dev/null 2>&1 && go get "$module@v$FENCELOCK_VERSION" 2>&1 | sed "s/^/      /" \
    && go build -o "$out/interop-worker" .)
}

echo "installing the fronts from $dist into $dest"
# (`if`, not `&&`: a failing step inside an install function must stop the script.)
if have python python3; then install_python; echo "   python: $dest/python/venv"; fi
if have node node npm; then install_node; echo "   node: $dest/node/node_modules/fencelock"; fi
if have .NET mono mcs; then install_dotnet; echo "   .NET: $dest/dotnet"; fi
if have jvm java mvn; then install_jvm; echo "   jvm: $dest/jvm/classpath.txt"; fi
if have go go; then install_go; echo "   go: $dest/go/interop-worker"; fi

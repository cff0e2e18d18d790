#!/usr/bin/env bash
# Tests the JVM front (bindings/jvm) on a machine with a JDK (17 or later) and
# Maven: builds the uniffi library and its bindings generator (one cargo
# command, bindings/jvm/rust), generates the Kotlin bindings from the built
# library (uniffi's library mode; they are generated on every run, not
# committed), puts the library where the jar carries it for JNA
# (linux-x86-64/libfencelock_jvm.so), then runs Maven: the Kotlin and Java
# tests (JUnit 5) against real redis-server nodes from the shared harness,
# and the jar, which must carry the library. Maven downloads its plugins and
# dependencies from Maven Central on first use. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/ensure-deps.sh
for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "$tool is required for the JVM front (a JDK 17 or later and Maven 3.8 or later;" \
      "on Debian: apt-get install openjdk-17-jdk-headless maven)" >&2
    exit 1
  fi
done

echo "== cargo build -p fencelock-harness --bin redis-nodes; -p fencelock-jvm --features cli"
cargo build -q -p fencelock-harness --bin redis-nodes
cargo build -q -p fencelock-jvm --features cli
target="${CARGO_TARGET_DIR:-$root/target}"
jvm="$root/bindings/jvm"

echo "== uniffi-bindgen (Kotlin, library mode); the library into the jar's resources"
# Shared with scripts/package/jvm.sh (bindings/jvm/prepare.sh).
source "$jvm/prepare.sh"
jvm_prepare "$target/debug" "$target/debug" "$jvm/target"

echo "== mvn package (Kotlin and Java tests against real Redis nodes, then the jar)"
rm -rf "$jvm/target/surefire-reports"
export FENCELOCK_REDIS_NODES="$target/debug/redis-nodes"
status=0
# (Maven 3.8 prints colour resets even with -B; they are dropped.)
# dependency:build-classpath lists the jar's dependencies for the interop
# test's JVM worker (bindings/jvm/target/classpath.txt, below).
(cd "$jvm" && mvn -q -B -ntp -Dstyle.color=never package dependency:build-classpath \
  -Dmdep.outputFile=target/dependencies.txt -DincludeScope=runtime 2>&1 | sed 's/\x1b\[[0-9;]*m//g'; exit "${PIPESTATUS[0]}") || status=$?
# Surefire's counts, which -q keeps quiet, as one closing line.
jvm_surefire_summary "$jvm/target/surefire-reports" jvm
if [ "$status" != 0 ]; then
  echo "mvn failed (exit $status); reports in bindings/jvm/target/surefire-reports" >&2
  exit "$status"
fi

jar_file="$jvm/target/fencelock-0.1.0.jar"
if ! jar tf "$jar_file" | grep -qx 'linux-x86-64/libfencelock_jvm.so'; then
  echo "the jar does not carry linux-x86-64/libfencelock_jvm.so: $jar_file" >&2
  exit 1
fi
echo "jar: $(basename "$jar_file") carries linux-x86-64/libfencelock_jvm.so"
echo "$jar_file:$(cat "$jvm/target/dependencies.txt")" >"$jvm/target/classpath.txt"

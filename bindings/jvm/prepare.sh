# The JVM front's steps between cargo and Maven, shared by scripts/test-jvm.sh
# (a debug build, then the tests) and scripts/package/jvm.sh (a release build,
# then the published jar). Sourced, not run; bash.

# jvm_prepare LIBDIR BINDGENDIR BUILD [strict]
# Generates the uniffi Kotlin from LIBDIR/libfencelock_jvm.so with
# BINDGENDIR/uniffi-bindgen (uniffi's library mode: the bindings always match
# the library they ship with, so they are generated, not committed; the
# generator reads the library's metadata, so a debug generator serves a
# release library) into
# BUILD/generated-sources/uniffi, and puts the library without its debug
# information (a tenth of the size) into BUILD/native/linux-x86-64/, where the
# jar carries it and JNA's Native.register("fencelock_jvm") (the generated
# findLibraryName) looks for it on Linux x86-64. BUILD is Maven's build
# directory (-Dfencelock.target, bindings/jvm/pom.xml). With "strict" (a
# package), a missing strip is an error; otherwise the library is copied whole.
jvm_prepare() {
  local libdir=$1 bindgendir=$2 build=$3 strict=${4:-}
  local library="$libdir/libfencelock_jvm.so" bindgen="$bindgendir/uniffi-bindgen"
  for file in "$library" "$bindgen"; do
    if [ ! -f "$file" ]; then
      echo "jvm: $file is missing: build it first (cargo build -p fencelock-jvm --features cli)" >&2
      return 1
    fi
  done
  rm -rf "$build/generated-sources/uniffi" "$build/native"
  "$bindgen" generate --library "$library" --language kotlin \
    --out-dir "$build/generated-sources/uniffi" --no-format >/dev/null
  mkdir -p "$build/native/linux-x86-64"
  local packed="$build/native/linux-x86-64/libfencelock_jvm.so"
  if command -v strip >/dev/null 2>&1; then
    strip --strip-debug -o "$packed" "$library"
  elif [ "$strict" = strict ]; then
    echo "jvm: strip is required to pack the library without its debug information" \
      "(on Debian: apt-get install binutils)" >&2
    return 1
  else
    cp "$library" "$packed"
  fi
}

# jvm_surefire_summary REPORTS LABEL
# Surefire's counts in the directory REPORTS (which mvn -q keeps quiet), as
# one line: "LABEL: N passed, F failed, S skipped". Sets jvm_passed and
# jvm_failed for the caller; prints nothing when there is no report.
jvm_surefire_summary() {
  local reports=("$1"/TEST-*.xml) label=$2
  jvm_passed=0 jvm_failed=0
  [ -e "${reports[0]}" ] || return 0
  local tests failures errors skipped
  _jvm_count() {
    grep -ho "<testsuite [^>]*" "${reports[@]}" | grep -o " $1=\"[0-9]*\"" | tr -dc '0-9\n' \
      | awk '{ n += $1 } END { print n + 0 }'
  }
  tests=$(_jvm_count tests) failures=$(_jvm_count failures) errors=$(_jvm_count errors) skipped=$(_jvm_count skipped)
  jvm_failed=$((failures + errors))
  jvm_passed=$((tests - jvm_failed - skipped))
  echo "$label: $jvm_passed passed, $jvm_failed failed, $skipped skipped"
}

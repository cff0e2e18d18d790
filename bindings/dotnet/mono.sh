# The Mono steps scripts/test-dotnet.sh (the front's suite, on a debug build)
# and scripts/package/dotnet.sh (the NuGet package, and its test against the
# installed copy) share, so that the package is compiled and tested exactly as
# the suite is. Sourced from the repository root, not run.

# Installs each named tool missing from the PATH from Debian's packages:
# mcs (mono-mcs), mono (mono-runtime), nuget (nuget, Mono based, 2.8),
# xbuild (mono-xbuild: Mono's deprecated msbuild, the one Debian has).
dotnet_ensure_tools() {
  local tool missing=() sudo_cmd=""
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 && continue
    case "$tool" in
      mcs) missing+=(mono-mcs) ;;
      mono) missing+=(mono-runtime) ;;
      nuget) missing+=(nuget) ;;
      xbuild) missing+=(mono-xbuild) ;;
      zip) missing+=(zip) ;;
      unzip) missing+=(unzip) ;;
      *) echo "dotnet_ensure_tools: no Debian package known for '$tool'" >&2; return 2 ;;
    esac
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "installing ${missing[*]} from Debian's packages (apt-get)…"
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 \
      || { echo "could not install $tool (apt-get install ${missing[*]}); install it and run again" >&2; return 1; }
  done
}

# Compiles bindings/dotnet/src into DIR/FenceLock.dll and its XML docs;
# warnings are errors, as every doc comment must be there. Further mcs
# options (-optimize+, an extra source) follow DIR.
dotnet_compile_library() {
  local dir=$1
  shift
  mkdir -p "$dir"
  mcs -target:library -out:"$dir/FenceLock.dll" -doc:"$dir/FenceLock.xml" -warnaserror+ "$@" \
    bindings/dotnet/src/*.cs
}

# Compiles the tests and the example into DIR/Tests.exe and DIR/Example.exe
# against the FenceLock.dll at DLL. Mono resolves FenceLock from the program's
# directory at run time, so DLL should be (a copy of) DIR/FenceLock.dll.
dotnet_compile_programs() {
  dotnet_compile_tests "$@"
  mcs -target:exe -out:"$1/Example.exe" -r:"$2" -warnaserror+ examples/dotnet/Program.cs
}

# The tests alone, as above: DIR/Tests.exe against DLL.
dotnet_compile_tests() {
  mcs -target:exe -out:"$1/Tests.exe" -r:"$2" -warnaserror+ bindings/dotnet/tests/*.cs
}

# Runs EXAMPLE (Example.exe) against one node from the harness
# ($FENCELOCK_REDIS_NODES) and checks its three answers. Any further
# arguments come before mono (env assignments, e.g. MONO_LOG_MASK=dll).
dotnet_run_example() {
  local example=$1 nodes_pid first_line url output status=0
  shift
  coproc NODES { exec "$FENCELOCK_REDIS_NODES" --nodes 1; }
  nodes_pid=$NODES_PID
  read -r first_line <&"${NODES[0]}"
  url=$(printf '%s\n' "$first_line" | grep -o 'redis://[^"]*' | head -n 1)
  output=$(env FENCELOCK_NODES="$url" "$@" mono --debug "$example") || status=$?
  exec {NODES[1]}>&- # end of stdin stops the node
  wait "$nodes_pid" || true
  printf '%s\n' "$output"
  if [ "$status" != 0 ] \
    || ! grep -q '^B: 409 busy' <<<"$output" \
    || ! grep -q '^A: 200 paid order .* (fencing token [0-9]*)' <<<"$output" \
    || ! grep -q '^C: 200 .* already paid' <<<"$output"; then
    echo "example: unexpected output or exit status $status (expected B: 409 busy, A: 200 paid, C: 200 already paid)" >&2
    return 1
  fi
  echo "example: ok"
}

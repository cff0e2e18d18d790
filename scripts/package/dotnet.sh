#!/usr/bin/env bash
# The .NET package: FenceLock.VERSION.nupkg, packed with Mono's mcs and
# Debian's nuget 2.8 (no .NET SDK here), holding
#   lib/net48/FenceLock.dll, FenceLock.xml    mcs -optimize+, against Mono 6.8's class library
#   runtimes/linux-x64/native/libfencelock.so what .NET Core/5+ resolve on their own
#   build/FenceLock.targets (+ buildTransitive/)  copies the .so beside the output
#                                             for .NET Framework/Mono msbuild consumers
#   README.md, FenceLock.nuspec
# The manifest and the targets are in bindings/dotnet/package/.
#   scripts/package/dotnet.sh build DIST | test DIST     (see scripts/package/common.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/package/common.sh
source bindings/dotnet/mono.sh
verb=${1:-} dist=${2:-}
[ -n "$dist" ] || { echo "usage: $0 build|test DIST" >&2; exit 2; }
dist=$(realpath -m "$dist")
nupkg="FenceLock.$FENCELOCK_VERSION.nupkg"
# mcs compiles against Mono 6.8's class library (/usr/lib/mono/4.5, despite
# the name), which has carried the .NET Framework 4.8 profile since Mono 6.6
# (Debian's mono-xbuild lists v4.8 as its newest): net48.
tfm=net48
# What the package must hold; the build checks the .nupkg against it.
contents=(
  "lib/$tfm/FenceLock.dll"
  "lib/$tfm/FenceLock.xml"
  runtimes/linux-x64/native/libfencelock.so
  build/FenceLock.targets
  buildTransitive/FenceLock.targets
  README.md
  FenceLock.nuspec
)

# Runs Debian's nuget with its configuration and caches in DIR/home, so that a
# NuGet.Config of the user's (other sources, a machine cache) takes no part.
nuget_in() {
  local home=$1
  shift
  mkdir -p "$home"
  env -u XDG_CONFIG_HOME -u XDG_DATA_HOME -u XDG_CACHE_HOME HOME="$home" nuget "$@" -NonInteractive
}

build() {
  local so="$FENCELOCK_RELEASE_DIR/libfencelock.so" work stage listed manifest missing=() entry
  [ -f "$so" ] || { echo "dotnet: $so is missing: run scripts/package.sh (it builds fencelock-ffi in release)" >&2; return 1; }
  package_check_glibc "$so"
  case "$FENCELOCK_VERSION" in
    *-*.*) echo "dotnet: nuget 2.8 cannot pack version $FENCELOCK_VERSION (a SemVer 2 pre-release with a dot)" >&2; return 1 ;;
  esac
  dotnet_ensure_tools mcs mono nuget zip unzip

  work="${CARGO_TARGET_DIR:-target}/dotnet/package"
  stage="$work/stage"
  rm -rf "$work"
  mkdir -p "$stage/lib/$tfm" "$stage/runtimes/linux-x64/native" "$stage/build" "$stage/buildTransitive"

  # The version is stamped into the assembly so a consumer can tell which package it runs.
  printf '[assembly: System.Reflection.AssemblyVersion("%s")]\n[assembly: System.Reflection.AssemblyInformationalVersion("%s")]\n' \
    "${FENCELOCK_VERSION%%-*}" "$FENCELOCK_VERSION" >"$work/AssemblyVersion.cs"
  echo "mcs -optimize+: lib/$tfm/FenceLock.dll ($(mcs --version))"
  dotnet_compile_library "$stage/lib/$tfm" -optimize+ "$work/AssemblyVersion.cs"
  strip --strip-debug -o "$stage/runtimes/linux-x64/native/libfencelock.so" "$so"
  cp bindings/dotnet/package/build/FenceLock.targets "$stage/build/"
  cp bindings/dotnet/package/buildTransitive/FenceLock.targets "$stage/buildTransitive/"
  cp bindings/dotnet/README.md "$stage/"

  # nuget 2.8 rejects what its schema does not know (<license>, <readme>):
  # it packs a copy without them, then the packed manifest is replaced by the
  # full one (NuGet reads a manifest without validating it; the test installs
  # the result with this same nuget).
  sed -e "s/\\\$version\\\$/$FENCELOCK_VERSION/" -e "/^<!--/,/^-->/d" bindings/dotnet/package/FenceLock.nuspec >"$work/FenceLock.nuspec"
  # Without a <files> list, nuget 2.8 here packs nothing from -BasePath
  # ("no dependencies nor content"): the staged tree is listed.
  grep -vE '<(license|readme)[ >]' "$work/FenceLock.nuspec" \
    | sed 's#^</package>#  <files>\n    <file src="lib/**" target="lib" />\n    <file src="runtimes/**" target="runtimes" />\n    <file src="build/**" target="build" />\n    <file src="buildTransitive/**" target="buildTransitive" />\n    <file src="README.md" target="" />\n  </files>\n</package>#' \
      >"$work/FenceLock.nuget28.nuspec"
  rm -f "$dist"/FenceLock.*.nupkg
  nuget_in "$work/home" pack "$work/FenceLock.nuget28.nuspec" -BasePath "$stage" -OutputDirectory "$dist" \
    -NoPackageAnalysis >"$work/pack.log" || { cat "$work/pack.log" >&2; echo "dotnet: nuget pack failed" >&2; return 1; }
  [ -f "$dist/$nupkg" ] || { cat "$work/pack.log" >&2; echo "dotnet: nuget pack wrote no $dist/$nupkg" >&2; return 1; }
  (cd "$work" && zip -q "$dist/$nupkg" FenceLock.nuspec)

  unzip -l "$dist/$nupkg"
  listed=$(unzip -Z1 "$dist/$nupkg")
  for entry in "${contents[@]}"; do
    grep -qxF "$entry" <<<"$listed" || missing+=("$entry")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "dotnet: $nupkg lacks ${missing[*]} (staged in $stage)" >&2
    return 1
  fi
  manifest=$(unzip -p "$dist/$nupkg" FenceLock.nuspec)
  if ! grep -qF '<license type="expression">MIT OR Apache-2.0</license>' <<<"$manifest" \
    || ! grep -qF "<version>$FENCELOCK_VERSION</version>" <<<"$manifest"; then
    echo "dotnet: the manifest in $nupkg lacks the license expression or version $FENCELOCK_VERSION:" >&2
    printf '%s\n' "$manifest" >&2
    return 1
  fi
  if grep -qF .debug_ <<<"$(readelf -S "$stage/runtimes/linux-x64/native/libfencelock.so")"; then
    echo "dotnet: the packed libfencelock.so still has debug sections" >&2
    return 1
  fi
  echo "$nupkg"
}

# Installed from DIST alone into the sandbox, as a packages.config project
# gets it; the tests are compiled with mcs against the installed FenceLock.dll,
# the example is built by xbuild as a project referencing the package (so
# build/FenceLock.targets is what puts libfencelock.so beside it), and both run
# on real nodes with the installed copies, checked by checksum and by Mono's
# own log of what it loaded.
test_installed() {
  local archive sandbox=$FENCELOCK_SANDBOX pkg bin consumer file
  archive=$(package_artifact "$dist" "$nupkg")
  dotnet_ensure_tools mcs mono nuget xbuild unzip

  # -NoCache: nuget 2.8 would otherwise also take the package from its
  # machine cache, where an older build of the same version may sit.
  nuget_in "$sandbox/home" install FenceLock -Version "$FENCELOCK_VERSION" -Source "$dist" \
    -OutputDirectory "$sandbox/packages" -NoCache \
    || { echo "dotnet: nuget could not install FenceLock $FENCELOCK_VERSION from $dist (see above)" >&2; return 1; }
  pkg="$sandbox/packages/FenceLock.$FENCELOCK_VERSION"
  for file in "lib/$tfm/FenceLock.dll" runtimes/linux-x64/native/libfencelock.so build/FenceLock.targets; do
    [ -f "$pkg/$file" ] || { echo "dotnet: nuget install left no $file in $pkg" >&2; return 1; }
  done
  # Debian's libc and friends only: a dependency on Rust's libstd or on a
  # build directory would show here as "not found".
  if grep -q 'not found' <<<"$(ldd "$pkg/runtimes/linux-x64/native/libfencelock.so")"; then
    echo "dotnet: the installed libfencelock.so has unresolved dependencies:" >&2
    ldd "$pkg/runtimes/linux-x64/native/libfencelock.so" >&2
    return 1
  fi

  bin="$sandbox/bin"
  mkdir -p "$bin"
  # By hand what a project reference does (copy-local of the DLL) and what
  # build/FenceLock.targets does for msbuild/xbuild consumers (the .so beside
  # the output), where Mono looks for both.
  cp "$pkg/lib/$tfm/FenceLock.dll" "$pkg/runtimes/linux-x64/native/libfencelock.so" "$bin/"
  echo "mcs: Tests.exe against $pkg/lib/$tfm/FenceLock.dll"
  dotnet_compile_tests "$bin" "$pkg/lib/$tfm/FenceLock.dll"

  # What NuGet in an IDE writes into a packages.config project when the
  # package is added (the nuget command installs files only): a HintPath
  # reference to lib/$tfm and an import of build/FenceLock.targets.
  # NoCompilerStandardLib: Debian's Mono has no reference assemblies, so
  # xbuild must let mcs take its own mscorlib. (xbuild 14 warns that it
  # does not know v4.8; it builds all the same.)
  consumer="$sandbox/consumer"
  mkdir -p "$consumer"
  cat >"$consumer/Example.csproj" <<XML
<?xml version="1.0" encoding="utf-8"?>
<Project ToolsVersion="4.0" DefaultTargets="Build" xmlns="http://schemas.microsoft.com/developer/msbuild/2003">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <AssemblyName>Example</AssemblyName>
    <TargetFrameworkVersion>v4.8</TargetFrameworkVersion>
    <OutputPath>bin</OutputPath>
    <NoCompilerStandardLib>false</NoCompilerStandardLib>
    <TreatWarningsAsErrors>true</TreatWarningsAsErrors>
  </PropertyGroup>
  <ItemGroup>
    <Reference Include="System" />
    <Reference Include="FenceLock">
      <HintPath>../packages/FenceLock.$FENCELOCK_VERSION/lib/$tfm/FenceLock.dll</HintPath>
    </Reference>
    <Compile Include="$PWD/examples/dotnet/Program.cs" />
  </ItemGroup>
  <Import Project="\$(MSBuildToolsPath)/Microsoft.CSharp.targets" />
  <Import Project="../packages/FenceLock.$FENCELOCK_VERSION/build/FenceLock.targets" />
</Project>
XML
  echo "xbuild: the example as a project referencing the package"
  xbuild /nologo /verbosity:minimal "$consumer/Example.csproj" >"$sandbox/xbuild.log" 2>&1 \
    || { cat "$sandbox/xbuild.log" >&2; echo "dotnet: xbuild could not build $consumer/Example.csproj" >&2; return 1; }
  [ -f "$consumer/bin/libfencelock.so" ] \
    || { echo "dotnet: build/FenceLock.targets copied no libfencelock.so into $consumer/bin" >&2; return 1; }

  for file in "$bin/FenceLock.dll" "$bin/libfencelock.so" "$consumer/bin/FenceLock.dll" "$consumer/bin/libfencelock.so"; do
    check_packed "$archive" "$file"
  done
  echo "FenceLock.dll and libfencelock.so beside the programs are the packed ones (sha256)"

  # Nothing but the sandbox on the load path: no build directory's library
  # through LD_LIBRARY_PATH, no assembly through MONO_PATH; run from the
  # sandbox so no path relative to the repository resolves.
  unset LD_LIBRARY_PATH LD_PRELOAD MONO_PATH
  export FENCELOCK_VECTORS="$PWD/tests/vectors/protocol.json" # test data, read by the suite
  cd "$sandbox"

  # Mono's log names the file each assembly and each DllImport was loaded
  # from: FenceLock.dll and libfencelock.so must be the sandbox's copies.
  local log_env=(MONO_LOG_LEVEL=info MONO_LOG_MASK=asm,dll)
  echo "== .NET tests (Mono), installed package"
  env "${log_env[@]}" MONO_LOG_DEST="$sandbox/tests-mono.log" mono --debug "$bin/Tests.exe"
  check_loaded "$sandbox/tests-mono.log" "$bin" tests

  echo "== .NET example (Mono), built by xbuild from the installed package, against one harness node"
  dotnet_run_example "$consumer/bin/Example.exe" "${log_env[@]}" MONO_LOG_DEST="$sandbox/example-mono.log"
  check_loaded "$sandbox/example-mono.log" "$consumer/bin" example
}

# Fails unless FILE is the same as the file of its name packed in ARCHIVE.
check_packed() {
  local archive=$1 file=$2 entry packed used
  case "${file##*/}" in
    FenceLock.dll) entry="lib/$tfm/FenceLock.dll" ;;
    libfencelock.so) entry=runtimes/linux-x64/native/libfencelock.so ;;
  esac
  packed=$(unzip -p "$archive" "$entry" | sha256sum | cut -d' ' -f1)
  used=$(sha256sum "$file" | cut -d' ' -f1)
  [ "$packed" = "$used" ] || { echo "dotnet: $file is not the $entry packed in $archive" >&2; return 1; }
}

# Fails unless Mono's LOG says the program loaded FenceLock.dll and
# libfencelock.so from DIR, and from nowhere else.
check_loaded() {
  local log=$1 dir=$2 what=$3 dll so
  dll=$(sed -n "s/^Mono: Assembly Loader loaded assembly from location: '\(.*FenceLock\.dll\)'\.\$/\1/p" "$log" | sort -u)
  so=$(sed -n "s/^Mono: DllImport loaded library '\(.*libfencelock[^/]*\)'\.\$/\1/p" "$log" | sort -u)
  if [ "$dll" != "$dir/FenceLock.dll" ] || [ "$so" != "$dir/libfencelock.so" ]; then
    # A bare name is what the dynamic loader found on its own search path.
    echo "dotnet: the $what loaded FenceLock.dll from ${dll:-nowhere logged} and libfencelock from ${so:-nowhere logged}," \
      "not from $dir (Mono's log: $log)" >&2
    return 1
  fi
  echo "the $what loaded $dll and $so"
}

case "$verb" in
  build) build ;;
  test) test_installed ;;
  *) echo "usage: $0 build|test DIST" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# The JVM front's package (issue 20): a jar that carries the native library,
# and the POM a Maven or Gradle build needs to fetch its dependencies (JNA,
# the Kotlin standard library, kotlinx-coroutines) from Maven Central.
#   scripts/package/jvm.sh build DIST   a release build: DIST/fencelock-VERSION.jar,
#                                       DIST/fencelock-VERSION.pom and DIST/fencelock-VERSION-sources.jar
#   scripts/package/jvm.sh test DIST    deploys them into a repository in $FENCELOCK_SANDBOX and runs
#                                       the front's tests (bindings/jvm/src/test/{kotlin,java}) in a project that
#                                       depends on them, against real Redis nodes, without Rust
# Called by scripts/package.sh and scripts/test-packages.sh from the
# repository root (see scripts/package/common.sh for the environment).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
source scripts/package/common.sh
source bindings/jvm/prepare.sh

jvm="$root/bindings/jvm"
# Maven's build directory for the package, apart from scripts/test-jvm.sh's
# target/ (a debug library), so that neither packs the other's library.
build_dir="$jvm/target/package"
# Quiet, batch, no download progress, no colour codes (Maven 3.8 prints them even with -B).
mvn_flags=(-q -B -ntp -Dstyle.color=never)

die() {
  echo "jvm package: $*" >&2
  exit 1
}

need() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 \
      || die "$tool is required (a JDK 17 or later and Maven 3.8 or later; on Debian: apt-get install openjdk-17-jdk-headless maven binutils)"
  done
}

# The text of the first <NAME> element of bindings/jvm/pom.xml at the
# project's level (two spaces in), such as its groupId or version.
pom_value() {
  sed -n "s|^  <$1>\(.*\)</$1>\$|\1|p" "$jvm/pom.xml" | head -n 1
}

# The artifact's coordinates and description, from bindings/jvm/pom.xml.
group_id=$(pom_value groupId)
artifact_id=$(pom_value artifactId)
pom_version=$(pom_value version)
[ -n "$group_id" ] && [ -n "$artifact_id" ] && [ -n "$pom_version" ] \
  || die "could not read groupId, artifactId and version from bindings/jvm/pom.xml"
# dev.fencelock -> dev/fencelock, the path in a Maven repository.
group_path=${group_id//.//}

# Maven runs the whole line and strips colour codes; keeps Maven's exit status.
run_mvn() {
  mvn "${mvn_flags[@]}" "$@" 2>&1 | sed 's/\x1b\[[0-9;]*m//g'
  return "${PIPESTATUS[0]}"
}

build() {
  local dist=$1
  need java jar mvn strip
  [ "$pom_version" = "$FENCELOCK_VERSION" ] \
    || die "bindings/jvm/pom.xml says version $pom_version, Cargo.toml $FENCELOCK_VERSION: make them agree"

  # The library in release; its bindings generator as scripts/test-jvm.sh builds
  # it (debug, the same features), which CI has built already. A release
  # generator would compile uniffi's bindgen and its template engine optimized,
  # minutes on 2 cores, for a program that only reads the library's metadata.
  echo "== cargo build --release --target $FENCELOCK_HOST_TARGET -p fencelock-jvm --lib; the generator: cargo build -p fencelock-jvm --features cli"
  with_zig cargo build -q --release --target "$FENCELOCK_HOST_TARGET" -p fencelock-jvm --lib
  package_check_glibc "$FENCELOCK_RELEASE_DIR/libfencelock_jvm.so"
  cargo build -q -p fencelock-jvm --features cli

  echo "== uniffi-bindgen (Kotlin) from the release library; the library, stripped, into the jar's resources"
  rm -rf "$build_dir"
  jvm_prepare "$FENCELOCK_RELEASE_DIR" "${CARGO_TARGET_DIR:-$root/target}/debug" "$build_dir" strict

  # The jar without its tests (they run against the installed package in
  # `test`), and the direct runtime dependencies for the published POM.
  echo "== mvn package (the jar; the tests run in \`scripts/package/jvm.sh test\`)"
  local dependencies="$build_dir/runtime-dependencies.txt"
  (cd "$jvm" && run_mvn -Dmaven.test.skip=true "-Dfencelock.target=$build_dir" package dependency:list \
    -DexcludeTransitive=true -DincludeScope=runtime -DoutputAbsoluteArtifactFilename=false \
    "-DoutputFile=$dependencies") || die "mvn package failed in bindings/jvm (see above)"

  local jar="$build_dir/$artifact_id-$pom_version.jar"
  [ -f "$jar" ] || die "mvn package made no $jar"
  jar tf "$jar" | grep -qx 'linux-x86-64/libfencelock_jvm.so' \
    || die "$jar does not carry linux-x86-64/libfencelock_jvm.so (see bindings/jvm/pom.xml's resources)"

  write_pom "$dependencies" >"$build_dir/$artifact_id-$pom_version.pom" || die "could not write the POM"
  # Sources for IDEs: the Kotlin API and the generated bindings it wraps.
  jar --create --file "$build_dir/$artifact_id-$pom_version-sources.jar" \
    -C "$jvm/src/main/kotlin" . -C "$build_dir/generated-sources/uniffi" .

  # A stale package of another version would make `test` ambiguous.
  rm -f "$dist/$artifact_id"-*.jar "$dist/$artifact_id"-*.pom
  cp "$jar" "$build_dir/$artifact_id-$pom_version.pom" "$build_dir/$artifact_id-$pom_version-sources.jar" "$dist/"
  echo "jvm: $artifact_id-$pom_version.jar ($(du -k "$jar" | cut -f1) KiB, carries linux-x86-64/libfencelock_jvm.so)," \
    "$artifact_id-$pom_version.pom, $artifact_id-$pom_version-sources.jar"
}

# The POM published beside the jar: the coordinates, and as dependencies the
# jar's direct runtime dependencies as Maven resolved them for the build
# (dependency:list), so that the user's build fetches what the jar needs.
write_pom() {
  local dependencies=$1 listed
  # Lines such as "   org.jetbrains.kotlin:kotlin-stdlib:jar:2.4.21:compile -- module kotlin.stdlib".
  listed=$(sed -n 's/^ *\([^ :]*\):\([^ :]*\):jar:\([^ :]*\):\(compile\|runtime\).*/\1 \2 \3 \4/p' "$dependencies")
  [ -n "$listed" ] || die "no runtime dependency in $dependencies (dependency:list's format changed?)"
  cat <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- The published POM of fencelock's JVM front (made by scripts/package/jvm.sh). -->
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>$group_id</groupId>
  <artifactId>$artifact_id</artifactId>
  <version>$pom_version</version>
  <packaging>jar</packaging>
  <name>$(pom_value name)</name>
  <description>$(pom_value description) Carries its native library for Linux x86-64 (glibc).</description>
  <licenses>
    <license>
      <name>MIT</name>
      <url>https://opensource.org/licenses/MIT</url>
    </license>
    <license>
      <name>Apache-2.0</name>
      <url>https://www.apache.org/licenses/LICENSE-2.0</url>
    </license>
  </licenses>
  <dependencies>
EOF
  local group artifact version scope
  while read -r group artifact version scope; do
    cat <<EOF
    <dependency>
      <groupId>$group</groupId>
      <artifactId>$artifact</artifactId>
      <version>$version</version>
      <scope>$scope</scope>
    </dependency>
EOF
  done <<<"$listed"
  cat <<EOF
  </dependencies>
</project>
EOF
}

test_package() {
  local dist=$1
  need java jar mvn
  local sandbox=${FENCELOCK_SANDBOX:?FENCELOCK_SANDBOX is not set: run scripts/test-packages.sh jvm}
  [ -n "${FENCELOCK_REDIS_NODES:-}" ] || die "FENCELOCK_REDIS_NODES is not set: run scripts/test-packages.sh jvm"
  local jar pom version
  jar=$(package_artifact "$dist" "$artifact_id-$FENCELOCK_VERSION.jar")
  pom=$(package_artifact "$dist" "$artifact_id-$FENCELOCK_VERSION.pom")
  version=$FENCELOCK_VERSION
  jar tf "$jar" | grep -qx 'linux-x86-64/libfencelock_jvm.so' \
    || die "$jar does not carry linux-x86-64/libfencelock_jvm.so: rebuild it with scripts/package.sh jvm"

  # Maven's local repository is the sandbox's own: one in ~/.m2 may hold an
  # older dev.fencelock artifact (installed, or fetched from a sandbox of an
  # earlier run), which Maven would take without looking further. Everything
  # else comes from the usual cache, read as a file repository (its layout is
  # a repository's), and from Maven Central only when the cache lacks it.
  local cache=${FENCELOCK_MAVEN_CACHE:-$HOME/.m2/repository}
  local cache_repo="" cache_plugin_repo=""
  if [ -d "$cache" ]; then
    cache_repo="<repository><id>maven-cache</id><url>file://$cache</url></repository>"
    cache_plugin_repo="<pluginRepository><id>maven-cache</id><url>file://$cache</url></pluginRepository>"
  fi
  cat >"$sandbox/settings.xml" <<EOF
<settings>
  <localRepository>$sandbox/m2</localRepository>
  <profiles>
    <profile>
      <id>fencelock-package</id>
      <repositories>
        <!-- First: the package under test is taken from here. -->
        <repository><id>fencelock-sandbox</id><url>file://$sandbox/repo</url></repository>
        $cache_repo
      </repositories>
      <pluginRepositories>$cache_plugin_repo</pluginRepositories>
    </profile>
  </profiles>
  <activeProfiles><activeProfile>fencelock-package</activeProfile></activeProfiles>
</settings>
EOF

  # The deploy plugin runs with the usual local repository, where it stays
  # cached from one run to the next (deploying puts nothing there).
  echo "== mvn deploy:deploy-file: $(basename "$jar") and its POM into $sandbox/repo"
  (cd "$sandbox" && run_mvn org.apache.maven.plugins:maven-deploy-plugin:2.7:deploy-file \
    "-Dfile=$jar" "-DpomFile=$pom" -DrepositoryId=fencelock-sandbox "-Durl=file://$sandbox/repo") \
    || die "could not deploy $jar into $sandbox/repo"
  mvn_flags+=(-s "$sandbox/settings.xml")

  # A project of a user's: it depends on the package, and its tests are the
  # front's own (Kotlin and Java), compiled against the installed jar; not
  # src/test/internal, whose white-box tests call what the jar keeps internal.
  local project="$sandbox/consumer"
  mkdir -p "$project/src/test"
  cp -r "$jvm/src/test/kotlin" "$jvm/src/test/java" "$project/src/test/"
  write_consumer_pom "$version" >"$project/pom.xml" || die "could not write the consumer's POM"

  echo "== mvn test: the front's tests against the installed package and real Redis nodes"
  local status=0
  # No library path of any kind: JNA must find the library in the jar.
  (cd "$project" && unset LD_LIBRARY_PATH JNA_LIBRARY_PATH && run_mvn test) || status=$?
  jvm_surefire_summary "$project/target/surefire-reports" "jvm package"
  [ "$status" = 0 ] || die "the tests failed against the installed package (mvn exit $status); reports in $project/target/surefire-reports"
  [ "$jvm_passed" -gt 0 ] || die "no test ran against the installed package"

  # The jar the tests used is the one deployed from DIST, fetched from the
  # sandbox's repository, and JNA took the library out of it (jna.debug_load).
  local installed="$sandbox/m2/$group_path/$artifact_id/$version/$artifact_id-$version.jar"
  [ -f "$installed" ] || die "the consumer did not resolve $group_id:$artifact_id:$version into $sandbox/m2"
  cmp -s "$installed" "$jar" || die "$installed differs from $jar"
  grep -q "^$artifact_id-$version.jar>fencelock-sandbox=\$" "$(dirname "$installed")/_remote.repositories" \
    || die "$group_id:$artifact_id:$version did not come from the sandbox's repository"
  local found="Found library resource at jar:file:$installed!/linux-x86-64/libfencelock_jvm.so"
  grep -qF "$found" "$project"/target/surefire-reports/*-output.txt \
    || die "JNA did not load libfencelock_jvm.so from the installed jar (no '$found' in the tests' output)"
  echo "jvm package: the tests loaded linux-x86-64/libfencelock_jvm.so from $installed"
}

# The consumer project: the package as a dependency, JUnit 5 and org.json for
# the tests, the Kotlin and Java test compilers and surefire as bindings/jvm
# uses them (versions read from its POM).
write_consumer_pom() {
  local version=$1 kotlin junit json resources compiler surefire
  kotlin=$(pom_value_property kotlin.version) && junit=$(pom_value_property junit.version) \
    && json=$(pom_value_property json.version) && resources=$(plugin_version maven-resources-plugin) \
    && compiler=$(plugin_version maven-compiler-plugin) && surefire=$(plugin_version maven-surefire-plugin) \
    || exit 1
  cat <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.fencelock.packagetest</groupId>
  <artifactId>consumer</artifactId>
  <version>1</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <maven.compiler.release>17</maven.compiler.release>
  </properties>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>org.junit</groupId>
        <artifactId>junit-bom</artifactId>
        <version>$junit</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>$group_id</groupId>
      <artifactId>$artifact_id</artifactId>
      <version>$version</version>
    </dependency>
    <dependency>
      <groupId>org.junit.jupiter</groupId>
      <artifactId>junit-jupiter</artifactId>
      <scope>test</scope>
    </dependency>
    <dependency>
      <groupId>org.json</groupId>
      <artifactId>json</artifactId>
      <version>$json</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
  <build>
    <testSourceDirectory>src/test/kotlin</testSourceDirectory>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-resources-plugin</artifactId>
        <version>$resources</version>
      </plugin>
      <plugin>
        <groupId>org.jetbrains.kotlin</groupId>
        <artifactId>kotlin-maven-plugin</artifactId>
        <version>$kotlin</version>
        <executions>
          <execution>
            <id>test-compile</id>
            <goals>
              <goal>test-compile</goal>
            </goals>
            <configuration>
              <sourceDirs>
                <sourceDir>\${project.basedir}/src/test/kotlin</sourceDir>
                <sourceDir>\${project.basedir}/src/test/java</sourceDir>
              </sourceDirs>
            </configuration>
          </execution>
        </executions>
        <configuration>
          <jvmTarget>17</jvmTarget>
        </configuration>
      </plugin>
      <plugin>
        <!-- Java after Kotlin: the Java test uses the Kotlin test classes. -->
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>$compiler</version>
        <executions>
          <execution>
            <id>default-compile</id>
            <phase>none</phase>
          </execution>
          <execution>
            <id>default-testCompile</id>
            <phase>none</phase>
          </execution>
          <execution>
            <id>java-test-compile</id>
            <phase>test-compile</phase>
            <goals>
              <goal>testCompile</goal>
            </goals>
            <configuration>
              <compileSourceRoots>
                <compileSourceRoot>\${project.basedir}/src/test/java</compileSourceRoot>
              </compileSourceRoots>
            </configuration>
          </execution>
        </executions>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-surefire-plugin</artifactId>
        <version>$surefire</version>
        <configuration>
          <trimStackTrace>false</trimStackTrace>
          <properties>
            <configurationParameters>junit.platform.discovery.issue.severity.critical=WARNING</configurationParameters>
          </properties>
          <redirectTestOutputToFile>true</redirectTestOutputToFile>
          <!-- jna.debug_load: JNA says where it found the library (checked
               after the run); jna.tmpdir: it extracts it into the sandbox. -->
          <argLine>-Djna.debug_load=true -Djna.tmpdir=$FENCELOCK_SANDBOX/jna</argLine>
          <systemPropertyVariables>
            <!-- tests/vectors/protocol.json, which the vectors tests read. -->
            <fencelock.repo>$root</fencelock.repo>
          </systemPropertyVariables>
        </configuration>
      </plugin>
    </plugins>
  </build>
</project>
EOF
}

# The value of the property <NAME> in bindings/jvm/pom.xml's <properties>.
pom_value_property() {
  local value
  value=$(sed -n "s|^ *<$1>\(.*\)</$1>\$|\1|p" "$jvm/pom.xml" | head -n 1)
  [ -n "$value" ] || die "no <$1> in bindings/jvm/pom.xml"
  printf '%s\n' "$value"
}

# The version bindings/jvm/pom.xml gives the plugin with artifactId NAME.
plugin_version() {
  local version
  version=$(sed -n "/<artifactId>$1<\/artifactId>/{n;s|^ *<version>\(.*\)</version>\$|\1|p}" "$jvm/pom.xml" | head -n 1)
  [ -n "$version" ] || die "no version for $1 in bindings/jvm/pom.xml"
  printf '%s\n' "$version"
}

case "${1:-}" in
  build) [ $# = 2 ] || die "usage: scripts/package/jvm.sh build DIST"; build "$(realpath -m "$2")" ;;
  test) [ $# = 2 ] || die "usage: scripts/package/jvm.sh test DIST"; test_package "$(realpath -m "$2")" ;;
  *) die "usage: scripts/package/jvm.sh build|test DIST" ;;
esac

#!/usr/bin/env bash
# Installs what the tests and the demo need from Debian's packages when it is
# missing: redis-server (real nodes), openssl (test certificates for TLS),
# python3 with venv,
# postgresql and pgbouncer (a real server, and a transaction pooler in front
# of it, for the PostgreSQL store's tests; only their programs are used,
# never their services), and
# for the C tests gcc, make, pkg-config and valgrind (and spin, which checks
# the protocol model, and curl and xz for scripts/valkey-server.sh), and a JDK
# and Maven for the JVM front. (Go 1.24 or
# newer comes with the CI image: Debian's golang-go is too old.)
# Sourced by scripts/demo.sh and scripts/test.sh.
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# Python with venv: the demo's last scene (tests/interop/interop.py) and the
# Python front's virtualenvs (Debian splits venv's ensurepip into python3-venv).
if ! command -v python3 >/dev/null 2>&1; then
  missing+=(python3 python3-venv)
elif ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
if [ "${FENCELOCK_DEPS_C:-0}" = 1 ]; then
  # Debian keeps initdb and postgres out of PATH, in /usr/lib/postgresql/<version>/bin.
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1 \
    || missing+=(postgresql)
  # PgBouncer in transaction pooling mode, in front of the PostgreSQL tests' server.
  command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
  command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
  command -v make >/dev/null 2>&1 || missing+=(make)
  command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
  command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
  command -v nft >/dev/null 2>&1 || missing+=(nftables)  # the netns fault tests (T18, T19)
  command -v spin >/dev/null 2>&1 || missing+=(spin)      # the protocol model (docs/model)
  # scripts/valkey-server.sh downloads and unpacks a Valkey source.
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  [ -f /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
  command -v xz >/dev/null 2>&1 || missing+=(xz-utils)
  # The JVM front (bindings/jvm): a JDK and Maven (the CI image ships both).
  command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} from Debian's packages (apt-get)…"
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  # The package's own service is not needed: the tests and the demo start their own nodes.
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v redis-server >/dev/null 2>&1 || { echo "could not install redis-server" >&2; exit 1; }

#!/usr/bin/env bash
# Installs redis-server from Debian's packages when it is not on PATH.
# Sourced by scripts/demo.sh and scripts/test.sh.
if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server not found; installing it from Debian's packages (apt-get)…"
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  # The package's own service is not needed: the tests and the demo start their own nodes.
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends redis-server >/dev/null
fi
command -v redis-server >/dev/null 2>&1 || { echo "could not install redis-server" >&2; exit 1; }

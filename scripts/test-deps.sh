#!/usr/bin/env bash
# Installs what the test suite needs beyond npm packages, when it is missing: redis-server (the
# rate-limit tests start their own instances on free ports; no system service is used) and openssl
# (test certificates). Needs root (or sudo) only when something is missing.
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing for the tests: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

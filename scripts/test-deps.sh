#!/usr/bin/env bash
# Installs what the test suite needs beyond npm packages, when it is missing: redis-server (the
# rate-limit tests start their own instances on free ports; no system service is used), openssl
# (test certificates), dnsmasq (a DNS server on a loopback port whose answers change under the
# DNS-discovery test; dnsmasq-base is the binary without the system service) and Debian's
# python3-grpcio (a gRPC C-core peer that is not grpc-js, run with /usr/bin/python3 by
# test/fixtures/grpcio/peer.py) and Debian's chromium (the dashboard's page in a headless browser,
# driven by playwright-core, which brings no browser of its own). Needs root (or sudo) only when something is missing.
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
{ command -v dnsmasq >/dev/null 2>&1 || [ -x /usr/sbin/dnsmasq ]; } || missing+=(dnsmasq-base)
{ [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import grpc' >/dev/null 2>&1; } || missing+=(python3-grpcio)
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing for the tests: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

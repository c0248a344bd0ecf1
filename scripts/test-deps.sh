#!/usr/bin/env bash
# Installs what the test suite needs and is missing: Debian's Chromium, curl, ca-certificates, skopeo,
# PostgreSQL and Redis (the store's and the shared limits' tests run on them too, started by the tests in
# throw-away folders), the npm packages
# (real API clients and the playwright driver), and the .pwdriver folder playwright-go looks in.
# Safe to run again; it does nothing when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
[ -x /usr/lib/chromium/chromium ] || missing+=(chromium)
command -v curl >/dev/null || missing+=(curl)
# internal/image's tests: the CA bundle the image carries, and skopeo (containers/image, what podman
# load uses) reading the tarball.
[ -f /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
command -v skopeo >/dev/null || missing+=(skopeo)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
command -v redis-server >/dev/null || missing+=(redis-server)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} from Debian's packages"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

command -v node >/dev/null || { echo "node is required (Node 20): install it first" >&2; exit 1; }
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

mkdir -p .pwdriver
ln -sfn "$(command -v node)" .pwdriver/node
ln -sfn ../node_modules/playwright-core .pwdriver/package

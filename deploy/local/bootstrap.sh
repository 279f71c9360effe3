#!/usr/bin/env bash
# Installs what the local stack needs and is missing: uv, PostgreSQL, a JDK and Maven,
# Prometheus (promtool), Go (to build kustomize), podman and debootstrap (the compose stack), then the workspace's Python environment from
# the lock file, and kustomize for the Kubernetes manifests' tests (deploy/k8s/kustomize.sh).
# Safe to run again: every step checks first.
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf '[bootstrap] %s\n' "$*"; }

apt_packages=()
pg_bin_dir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
[ -n "$(pg_bin_dir)" ] && [ -x "$(pg_bin_dir)/initdb" ] || apt_packages+=(postgresql postgresql-contrib)
command -v java >/dev/null 2>&1 || apt_packages+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || apt_packages+=(maven)
command -v promtool >/dev/null 2>&1 || apt_packages+=(prometheus)
command -v go >/dev/null 2>&1 || apt_packages+=(golang-go)
# docker-compose.yml run for real (tools/compose-stack): podman with runc, its network stack and
# name service, and debootstrap for the offline base image.
command -v podman >/dev/null 2>&1 || apt_packages+=(podman)
command -v runc >/dev/null 2>&1 || apt_packages+=(runc)
command -v debootstrap >/dev/null 2>&1 || apt_packages+=(debootstrap)
[ -x /usr/lib/podman/netavark ] || apt_packages+=(netavark)
[ -x /usr/lib/podman/aardvark-dns ] || apt_packages+=(aardvark-dns)

if [ ${#apt_packages[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "missing system packages: ${apt_packages[*]} (run as root or install them yourself)"
    exit 1
  fi
  log "installing ${apt_packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Debian's packages start services of their own when installed (a PostgreSQL cluster on 5432,
  # a Prometheus on :9090), which the stack does not want and must not have to stop: stopping
  # by name could hit a PostgreSQL or Prometheus this project did not start. policy-rc.d (the
  # maintainer scripts' switch) tells them to start nothing for the length of the install.
  policy=/usr/sbin/policy-rc.d
  saved=""
  if [ -e "$policy" ]; then saved="$(mktemp)"; cp -p "$policy" "$saved"; fi
  restore_policy() {
    if [ -n "$saved" ]; then mv -f "$saved" "$policy"; else rm -f "$policy"; fi
  }
  trap restore_policy EXIT
  printf '#!/bin/sh\n# written by saga-choreography bootstrap for one apt-get install\nexit 101\n' \
    > "$policy"
  chmod 755 "$policy"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
  restore_policy
  trap - EXIT
fi

if ! command -v uv >/dev/null 2>&1; then
  log "installing uv"
  python3 -m pip install --quiet --disable-pip-version-check uv
fi

log "syncing the Python workspace (uv.lock)"
uv sync --frozen --quiet
log "kustomize (deploy/k8s/kustomize.sh pins its version)"
bash deploy/k8s/kustomize.sh version >/dev/null
log "ready"

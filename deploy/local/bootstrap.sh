#!/usr/bin/env bash
# Installs what the local stack needs and is missing: uv, PostgreSQL, a JDK and Maven,
# Prometheus (promtool), then the workspace's Python environment from the lock file.
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

if [ ${#apt_packages[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "missing system packages: ${apt_packages[*]} (run as root or install them yourself)"
    exit 1
  fi
  log "installing ${apt_packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Debian's postgresql package would start a cluster of its own on 5432; we only want the binaries.
  apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
  if command -v pg_lsclusters >/dev/null 2>&1; then
    pg_lsclusters -h 2>/dev/null | while read -r ver name _; do
      pg_ctlcluster "$ver" "$name" stop 2>/dev/null || true
    done
  fi
  # Debian's prometheus package starts its own daemon on :9090; the stack runs its own.
  if command -v systemctl >/dev/null 2>&1; then systemctl stop prometheus 2>/dev/null || true; fi
  pkill -x prometheus 2>/dev/null || true
fi

if ! command -v uv >/dev/null 2>&1; then
  log "installing uv"
  python3 -m pip install --quiet --disable-pip-version-check uv
fi

log "syncing the Python workspace (uv.lock)"
uv sync --frozen --quiet
log "ready"

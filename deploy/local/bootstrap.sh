#!/usr/bin/env bash
# Installs what a command of the project needs and is missing, and nothing else:
#   bootstrap.sh local     `make run`/`make up`/`make bench`/`make chaos` (the local stack)
#   bootstrap.sh compose   docker-compose.yml under podman (tools/compose-stack)
#   bootstrap.sh test      `make test`: all of the above and the test-only programs
# Every need also gets the base: the Debian packages of deploy/local/programs.txt for it, uv at the
# version and hashes of deploy/docker/uv-requirements.txt in .local/uv (git-ignored), then the
# workspace's Python environment from uv.lock. Kustomize is built on first use by
# deploy/k8s/kustomize.sh; `test` builds it here so that no test waits for it, and conftest
# (deploy/k8s/conftest.sh), the policy tester of the manifests.
# Safe to run again: every step checks first.
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf '[bootstrap] %s\n' "$*"; }

[ $# -gt 0 ] || set -- test
needs=(base)
for need in "$@"; do
  case "$need" in
    local) needs+=(local) ;;
    compose) needs+=(compose) ;;
    test) needs+=(local compose test) ;;
    *) echo "usage: bootstrap.sh [local|compose|test]..." >&2; exit 2 ;;
  esac
done

# programs.txt's rows for these needs whose program is missing: "program package" lines.
missing_programs() {
  local need program package wanted
  while read -r need program package; do
    case "$need" in ''|'#'*) continue ;; esac
    wanted=0
    for n in "${needs[@]}"; do [ "$n" = "$need" ] && wanted=1; done
    [ $wanted = 1 ] || continue
    case "$program" in
      python3:*)
        python3 -c "import ${program#python3:}" >/dev/null 2>&1 && continue ;;
      /*)
        # A path may be a glob (PostgreSQL's version directory).
        compgen -G "$program" >/dev/null && continue ;;
      *)
        command -v "$program" >/dev/null 2>&1 && continue ;;
    esac
    echo "$program $package"
  done < deploy/local/programs.txt
}

mapfile -t missing < <(missing_programs)
if [ ${#missing[@]} -gt 0 ]; then
  packages=()
  for row in "${missing[@]}"; do
    package="${row#* }"
    [[ " ${packages[*]} " == *" $package "* ]] || packages+=("$package")
  done
  if [ "$(id -u)" -ne 0 ]; then
    log "missing: ${missing[*]%% *}"
    log "install them as root: apt-get install --no-install-recommends ${packages[*]}"
    exit 1
  fi
  log "installing ${packages[*]} (for ${missing[*]%% *})"
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
  apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  restore_policy
  trap - EXIT
  # A package that installed but did not bring its program is a wrong row in programs.txt.
  mapfile -t still < <(missing_programs)
  if [ ${#still[@]} -gt 0 ]; then
    log "still missing after the install: ${still[*]%% *} (deploy/local/programs.txt)"
    exit 1
  fi
fi

# uv at the pinned version, its wheel checked against the pinned hashes, in a venv of its own:
# Debian's Python refuses installs into the system (PEP 668), and an unpinned uv could resolve
# the lock file differently. The Makefile puts .local/uv/bin first on PATH.
UV_PIN="$(sed -n 's/^uv==\([^ ]*\).*/\1/p' deploy/docker/uv-requirements.txt)"
UV=.local/uv/bin/uv
if [ ! -x "$UV" ] || [ "$("$UV" --version 2>/dev/null | cut -d' ' -f2)" != "$UV_PIN" ]; then
  log "installing uv $UV_PIN into .local/uv"
  rm -rf .local/uv
  python3 -m venv .local/uv
  .local/uv/bin/pip install --quiet --disable-pip-version-check --require-hashes \
    -r deploy/docker/uv-requirements.txt
fi

log "syncing the Python workspace (uv.lock)"
"$UV" sync --frozen --quiet
for need in "${needs[@]}"; do
  if [ "$need" = local ]; then
    # Under root the cluster runs as the user 'postgres' (PostgreSQL refuses root), which no
    # Debian package makes now that the server is not Debian's: made as Debian's would be.
    if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
      log "making the system user postgres (the local cluster runs as it)"
      useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/bash postgres
    fi
    # Debian 12 has only PostgreSQL 15: the pinned version's server comes from Maven Central.
    log "PostgreSQL $(cat deploy/postgres-version)'s server (local_stack.postgres.binaries)"
    "$UV" run --frozen --no-sync python -m local_stack.postgres.binaries >/dev/null
    # The schema registry's application: Apicurio's own build of it, from Maven Central.
    log "Apicurio Registry $(cat deploy/registry-version) (local_stack.registry.app)"
    "$UV" run --frozen --no-sync python -m local_stack.registry.app >/dev/null
  fi
  if [ "$need" = test ]; then
    log "kustomize (deploy/k8s/kustomize.sh pins its version)"
    bash deploy/k8s/kustomize.sh version >/dev/null
    log "conftest (deploy/k8s/conftest.sh pins its version)"
    bash deploy/k8s/conftest.sh -- --version >/dev/null
  fi
done
log "ready"

#!/usr/bin/env bash
# Runs a command of this checkout (by default `make test`) on a new machine: a Debian 12
# (bookworm) root made for this run with debootstrap from Debian's packages, holding nothing of
# the host's installed programs, and a copy of the checkout without what it made for itself. In
# it, only the README's prerequisites are installed (the `apt-get install` line of its
# "Prerequisites"), then the command runs as a user's would: every other program must come from
# the project's own bootstrap, or the run fails.
#
#   bash deploy/ci/fresh-root.sh [COMMAND...]        (root; `make test-fresh-root`, .ci/run)
#
# The root is entered as a container enters its own: in a mount namespace of its own where it
# is / (pivot_root, not chroot: podman's runc finds a container's root through the namespace's,
# and under a chroot `podman exec` lands in the host's), and a PID namespace of its own, so that
# every process started in it, containers included, ends with the command. It shares the host's
# kernel and network (its servers listen on the host's 127.0.0.1) and is deleted at the end with
# what the command wrote.
#
# Cached under SAGA_FRESH_ROOT_CACHE (default /var/cache/saga-fresh-root), none of which can
# stand in for an install step: the debootstrap tarball (Debian's base packages, made again
# after a week), and the downloads of apt, pip/uv, Maven and Go. What apt installs, the Python
# environment and the Kafka jars are made anew every run.
#
# The whole script is in functions called on its last line: bash reads a script as it runs it,
# and a checkout that changes during a run must not change the run.
set -euo pipefail

log() { printf '[fresh-root] %s\n' "$*"; }
# The root of this run, and when it began (the EXIT trap's, so not local to a function).
root=""
started=$(date +%s)
die() { log "$*" >&2; exit 1; }

# The host's side: the root made, the checkout copied, the root entered, the root deleted.
outside() {
  local checkout cache mirror suite tarball work rc
  checkout="$(cd "$(dirname "$0")/../.." && pwd)"
  [ $# -gt 0 ] || set -- make test
  [ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, namespaces and mounts)"
  [ -d "$checkout/.git" ] || die "$checkout/.git is not a folder (a git worktree): run it from a clone"
  cache="${SAGA_FRESH_ROOT_CACHE:-/var/cache/saga-fresh-root}"
  mirror="${SAGA_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
  suite=bookworm

  # The README's prerequisites, as a user copies them: the one `apt-get install` line between
  # its markers.
  local prerequisites
  prerequisites="$(sed -n '/<!-- prerequisites -->/,/<!-- \/prerequisites -->/p' "$checkout/README.md" \
    | grep -o 'apt-get install [^`]*' | head -n 1 | sed 's/^apt-get install //')"
  [ -n "$prerequisites" ] || die "README.md has no apt-get install line between its prerequisites markers"

  local program
  for program in debootstrap unshare pivot_root; do
    command -v "$program" >/dev/null 2>&1 && continue
    log "installing debootstrap and util-linux on the host (for $program)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap util-linux >/dev/null
    break
  done

  mkdir -p "$cache"/{apt-archives/partial,dot-cache,m2,go}
  tarball="$cache/$suite-minbase.tgz"
  if [ -z "$(find "$tarball" -mtime -7 2>/dev/null)" ]; then
    log "debootstrap: Debian $suite's base packages into $tarball"
    work="$(mktemp -d /var/tmp/saga-debootstrap.XXXXXX)"
    debootstrap --variant=minbase --make-tarball="$tarball.new" "$suite" "$work" "$mirror" >/dev/null
    rm -rf "$work"
    mv -f "$tarball.new" "$tarball"
  fi

  # Roots left by a run that was killed before it could delete its own; none is younger than
  # half a day (CI's runs are cut at 90 minutes), so that a run going on is never hit.
  local stale
  for stale in $(find /var/tmp -maxdepth 1 -name 'saga-fresh-root.*' -type d -mmin +720); do
    log "deleting $stale, left by an earlier run"
    rm -rf "$stale"
  done

  root="$(mktemp -d /var/tmp/saga-fresh-root.XXXXXX)"
  # The folder is /: everyone must be able to enter it (mktemp makes it 0700).
  chmod 755 "$root"
  # The mounts live in the root's own mount namespace and end with it, so nothing under the root
  # is mounted here, and deleting it never reaches the caches mounted into it.
  trap 'rm -rf "$root"; log "ended after $(( $(date +%s) - started )) s"' EXIT

  log "unpacking Debian $suite into $root"
  debootstrap --variant=minbase --unpack-tarball="$tarball" "$suite" "$root" "$mirror" >/dev/null
  cat > "$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb ${SAGA_DEBIAN_SECURITY_MIRROR:-${mirror%/debian}/debian-security} $suite-security main
EOF
  # Name resolution as the host's; the host's own certificate authorities (a network that
  # intercepts TLS is reached only through them), which ca-certificates adds when it installs.
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  cp /etc/hosts "$root/etc/hosts"
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  fi
  # apt downloads as its own user, which must be able to write into the cache.
  chown "$(chroot "$root" id -u _apt)" "$cache/apt-archives/partial"

  # The checkout as a clone would have it: its git folder and the files git does not ignore
  # (uncommitted changes included), at the same path in the root.
  mkdir -p "$root$checkout"
  (cd "$checkout" && git ls-files -z -co --exclude-standard \
     | tar -cf - --null --ignore-failed-read --no-recursion -T - --recursion .git) \
     | tar -xf - -C "$root$checkout"

  log "ready in $(( $(date +%s) - started )) s; the README's prerequisites, then: $*"
  set +e
  # --kill-child: when unshare ends, the namespace's first process is killed, and with it every
  # process of the namespace. unshare itself ignores SIGTERM while it waits, so a stop of this
  # script (SIGTERM, Ctrl-C) is passed on to it as SIGKILL: the run ends at once, not at the
  # stopper's SIGKILL.
  SAGA_FRESH_ROOT="$root" SAGA_FRESH_CHECKOUT="$checkout" SAGA_FRESH_CACHE="$cache" \
    SAGA_FRESH_PREREQUISITES="$prerequisites" \
    unshare --mount --pid --fork --kill-child --propagation private \
    bash "$0" --inside "$@" &
  inner=$!
  stopped=0
  trap 'stopped=1; log "stopped: ending the run"; kill -KILL "$inner" 2>/dev/null' TERM INT
  wait "$inner"
  rc=$?
  if [ $stopped -eq 1 ]; then
    # That wait returned for the signal; this one, once unshare has ended.
    wait "$inner"
    rc=143
  fi
  trap - TERM INT
  set -e
  log "status $rc"
  return $rc
}

# The namespace's side, as its first process: the root's mounts, pivot_root into it, then the
# prerequisites and the command with a clean environment.
inside() {
  local root="$SAGA_FRESH_ROOT" checkout="$SAGA_FRESH_CHECKOUT" cache="$SAGA_FRESH_CACHE"
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs -o mode=755 tmpfs "$root/run"
  bind() {  # bind SOURCE TARGET-IN-ROOT [ro]
    mkdir -p "$root$2"
    mount --bind "$1" "$root$2"
    [ "${3:-}" != ro ] || mount -o remount,bind,ro "$root$2"
  }
  # The contract and the standard beside the checkout, as the project's tests find them.
  if [ -d "$checkout/../shared" ]; then
    bind "$(cd "$checkout/../shared" && pwd)" "$(cd "$checkout/.." && pwd)/shared" ro
  fi
  bind "$cache/apt-archives" /var/cache/apt/archives
  bind "$cache/dot-cache" /root/.cache
  bind "$cache/m2" /root/.m2
  bind "$cache/go" /root/go

  # The machine's settings that tell programs where its certificate authorities and proxies
  # are, and the test run's own; nothing else of the host's environment.
  local passed=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
                LANG=C.UTF-8 TERM="${TERM:-dumb}" DEBIAN_FRONTEND=noninteractive) name
  while IFS='=' read -r name _; do
    case "$name" in
      CI|SAGA_FRESH_*) ;;
      SAGA_*|*_TEST_*|PYTEST_ADDOPTS|SSL_CERT_FILE|SSL_CERT_DIR|PIP_CERT|REQUESTS_CA_BUNDLE|\
      CURL_CA_BUNDLE|GIT_SSL_CAINFO|http_proxy|https_proxy|no_proxy|HTTP_PROXY|HTTPS_PROXY|NO_PROXY)
        passed+=("$name=${!name}") ;;
    esac
  done < <(env)
  [ -z "${CI:-}" ] || passed+=("CI=$CI")

  cd "$root"
  mkdir -p .old-root
  pivot_root . .old-root
  cd /
  umount -l /.old-root
  rmdir /.old-root
  local run
  run="apt-get update -qq && apt-get install -y -qq --no-install-recommends $SAGA_FRESH_PREREQUISITES >/dev/null"
  run="$run && cd '$checkout' && $(printf '%q ' "$@")"
  exec /usr/bin/env -i "${passed[@]}" /bin/bash -c "$run"
}

if [ "${1:-}" = --inside ]; then
  shift
  inside "$@"
else
  outside "$@"
fi

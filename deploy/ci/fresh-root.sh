#!/usr/bin/env bash
# Runs a command of this checkout (by default `make test`) on a new machine: a Debian 12
# (bookworm) root made for this run with debootstrap from Debian's packages, holding nothing of
# the host's installed programs, and a copy of the checkout without what it made for itself. In it, only the README's prerequisites are installed (the
# `apt-get install` line of its "Prerequisites"), then the command runs as a user's would: every
# other program must come from the project's own bootstrap, or the run fails. The root shares the
# host's kernel and network (its servers listen on the host's 127.0.0.1) and is deleted at the
# end, with every process started in it.
#
#   bash deploy/ci/fresh-root.sh [COMMAND...]        (root; `make test-fresh-root`, .ci/run)
#
# Cached under SAGA_FRESH_ROOT_CACHE (default /var/cache/saga-fresh-root), none of which can
# stand in for an install step: the debootstrap tarball (Debian's base packages, made again
# after a week), and the downloads of apt, pip/uv, Maven and Go. What apt installs, the Python
# environment and the Kafka jars are made anew every run.
set -euo pipefail
checkout="$(cd "$(dirname "$0")/../.." && pwd)"
[ $# -gt 0 ] || set -- make test

log() { printf '[fresh-root] %s\n' "$*"; }
die() { log "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot and mounts)"
cache="${SAGA_FRESH_ROOT_CACHE:-/var/cache/saga-fresh-root}"
mirror="${SAGA_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${SAGA_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
suite=bookworm

# The README's prerequisites, as a user copies them: the one `apt-get install` line of the
# section, between its markers.
prerequisites="$(sed -n '/<!-- prerequisites -->/,/<!-- \/prerequisites -->/p' "$checkout/README.md" \
  | grep -o 'apt-get install [^`]*' | head -n 1 | sed 's/^apt-get install //')"
[ -n "$prerequisites" ] || die "README.md has no apt-get install line between its prerequisites markers"

if ! command -v debootstrap >/dev/null 2>&1; then
  log "installing debootstrap on the host"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

mkdir -p "$cache"/{apt-archives,dot-cache,m2,go}
tarball="$cache/$suite-minbase.tgz"
if [ -z "$(find "$tarball" -mtime -7 2>/dev/null)" ]; then
  log "debootstrap: Debian $suite's base packages into $tarball"
  work="$(mktemp -d /var/tmp/saga-debootstrap.XXXXXX)"
  debootstrap --variant=minbase --make-tarball="$tarball.new" "$suite" "$work" "$mirror" >/dev/null
  rm -rf "$work"
  mv -f "$tarball.new" "$tarball"
fi

# The processes whose root is DIR or a container's inside it, and only those.
processes_in() {
  local link proc
  for proc in /proc/[0-9]*; do
    link="$(readlink "$proc/root" 2>/dev/null)" || continue
    if [ "$link" = "$1" ] || [[ "$link" == "$1"/* ]]; then echo "${proc#/proc/}"; fi
  done
}
# What is mounted under DIR, deepest first.
mounts_under() {
  awk -v r="$1" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}

# Roots left by a run that was killed (SIGKILL skips the clean-up below): deleted when nothing
# is mounted in them nor runs in them any more, and they are hours old, so that a run that is
# starting is never hit.
for stale in $(find /var/tmp -maxdepth 1 -name 'saga-fresh-root.*' -type d -mmin +360); do
  if [ -z "$(mounts_under "$stale")" ] && [ -z "$(processes_in "$stale")" ]; then
    log "deleting $stale, left by an earlier run"
    rm -rf "$stale"
  fi
done

root="$(mktemp -d /var/tmp/saga-fresh-root.XXXXXX)"
# The root folder is /: everyone must be able to enter it (mktemp makes it 0700).
chmod 755 "$root"
started=$(date +%s)

cleanup() {
  local rc=$?
  local pids
  mapfile -t pids < <(processes_in "$root")
  if [ ${#pids[@]} -gt 0 ]; then
    log "stopping ${#pids[@]} process(es) left in the root"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 1 20); do
      alive=0
      for p in "${pids[@]}"; do [ -d "/proc/$p" ] && alive=1; done
      [ $alive = 0 ] && break
      sleep 0.5
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  local target
  while read -r target; do
    [ -n "$target" ] && umount -l "$target" 2>/dev/null || true
  done < <(mounts_under "$root")
  # Never delete through a mount: the caches and shared/ are mounted in the root.
  if [ -n "$(mounts_under "$root")" ]; then
    log "still mounted under $root, left in place: $(mounts_under "$root" | tr '\n' ' ')" >&2
  else
    rm -rf "$root"
  fi
  log "ended with status $rc after $(( $(date +%s) - started )) s"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "unpacking Debian $suite into $root"
debootstrap --variant=minbase --unpack-tarball="$tarball" "$suite" "$root" "$mirror" >/dev/null

cat > "$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security_mirror $suite-security main
EOF
# Name resolution as the host's; the host's own certificate authorities (a network that
# intercepts TLS is reached only through them), which ca-certificates adds when it installs.
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp /etc/hosts "$root/etc/hosts"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi

# The root a mount point of its own, as / is on a machine: podman makes / private in the
# namespaces it makes, which fails where / is only a folder.
mount --bind "$root" "$root"
mount --make-private "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
bind() {  # bind SOURCE TARGET-IN-ROOT [ro]
  mkdir -p "$root$2"
  mount --bind "$1" "$root$2"
  mount --make-private "$root$2"
  [ "${3:-}" != ro ] || mount -o remount,bind,ro "$root$2"
}
# The checkout as a clone would have it: its git folder and the files git does not ignore
# (uncommitted changes included), copied to the same path in the root; nothing it made for itself
# (.local, .venv) comes along.
[ -d "$checkout/.git" ] || die "$checkout/.git is not a folder (a git worktree): run it from a clone"
mkdir -p "$root$checkout"
(cd "$checkout" && git ls-files -z -co --exclude-standard \
   | tar -cf - --null --ignore-failed-read --no-recursion -T - --recursion .git) | tar -xf - -C "$root$checkout"
# The contract and the standard beside the checkout, as the project's tests find them.
[ -d "$checkout/../shared" ] && bind "$(cd "$checkout/../shared" && pwd)" "$(cd "$checkout/.." && pwd)/shared" ro
bind "$cache/apt-archives" /var/cache/apt/archives
# apt downloads as its own user, which must be able to write there.
mkdir -p "$cache/apt-archives/partial"
chown "$(chroot "$root" id -u _apt)" "$cache/apt-archives/partial"
bind "$cache/dot-cache" /root/.cache
bind "$cache/m2" /root/.m2
bind "$cache/go" /root/go

# The machine's settings that tell programs where its certificate authorities and proxies are,
# and the test run's own settings; nothing else of the host's environment.
passed=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
        LANG=C.UTF-8 TERM="${TERM:-dumb}" DEBIAN_FRONTEND=noninteractive)
while IFS='=' read -r name _; do
  case "$name" in
    CI|SAGA_*|*_TEST_*|PYTEST_ADDOPTS|SSL_CERT_FILE|SSL_CERT_DIR|PIP_CERT|REQUESTS_CA_BUNDLE|\
    CURL_CA_BUNDLE|GIT_SSL_CAINFO|http_proxy|https_proxy|no_proxy|HTTP_PROXY|HTTPS_PROXY|NO_PROXY)
      passed+=("$name=${!name}") ;;
  esac
done < <(env)

in_root() { chroot "$root" /usr/bin/env -i "${passed[@]}" bash -c "$1"; }

log "the README's prerequisites: apt-get install $prerequisites"
in_root "apt-get update -qq && apt-get install -y -qq --no-install-recommends $prerequisites >/dev/null"
log "ready in $(( $(date +%s) - started )) s; running: $*"
set +e
in_root "cd '$checkout' && $(printf '%q ' "$@")"
rc=$?
set -e
exit $rc

#!/usr/bin/env bash
# Runs conftest (Open Policy Agent's policy tester) at the version pinned here, building it first
# into .local/bin (git-ignored) from the Go module proxy when it is missing or another version,
# with the Go toolchain kustomize is built with (deploy/k8s/go-toolchain.sh; some minutes on two
# cores the first time). A `go install` build reports its version as "dev", so the version built
# is written beside it. Its build output goes to stderr.
#
#   bash deploy/k8s/conftest.sh OVERLAY     renders the overlay and tests it against
#                                           deploy/k8s/policy (exit 1 on a violation)
#   bash deploy/k8s/conftest.sh -- ARGS     conftest ARGS
set -euo pipefail
cd "$(dirname "$0")/../.."

# v0.71 needs a newer Go than go-requirements.txt pins.
VERSION=v0.70.0
BIN="$PWD/.local/bin"
CONFTEST="$BIN/conftest"
# shellcheck source=deploy/k8s/go-toolchain.sh
. deploy/k8s/go-toolchain.sh

if [ ! -x "$CONFTEST" ] || [ "$(cat "$CONFTEST.version" 2>/dev/null)" != "$VERSION" ]; then
  GO="$(go_toolchain)"
  echo "[conftest] building conftest $VERSION into .local/bin" >&2
  mkdir -p "$BIN"
  GOTOOLCHAIN=local GOBIN="$BIN" GOFLAGS=-mod=mod "$GO" install \
    "github.com/open-policy-agent/conftest@$VERSION" >&2
  echo "$VERSION" > "$CONFTEST.version"
fi
if [ "${1:-}" = "--" ]; then
  shift
  exec "$CONFTEST" "$@"
fi
[ $# -eq 1 ] || { echo "usage: $0 OVERLAY | -- CONFTEST-ARGS" >&2; exit 2; }
bash deploy/k8s/kustomize.sh build "deploy/k8s/overlays/$1" \
  | "$CONFTEST" test --combine --no-color -p deploy/k8s/policy -

#!/usr/bin/env bash
# Runs kustomize at the version pinned here, building it first into .local/bin (git-ignored)
# from the Go module proxy when it is missing or another version (about a minute on two cores;
# Go's module and build caches make the next build faster). It is built with the Go toolchain of
# go-requirements.txt, installed into .local/go with its hashes checked, whatever Go the machine
# has: a Debian 12 Go (1.19) cannot build it. Its build output goes to stderr, so that
# `make manifests` prints the manifests alone.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=v5.7.1
BIN="$PWD/.local/bin"
KUSTOMIZE="$BIN/kustomize"
# shellcheck source=deploy/k8s/go-toolchain.sh
. deploy/k8s/go-toolchain.sh

if [ ! -x "$KUSTOMIZE" ] || [ "$("$KUSTOMIZE" version 2>/dev/null)" != "$VERSION" ]; then
  GO="$(go_toolchain)"
  echo "[kustomize] building kustomize $VERSION into .local/bin" >&2
  mkdir -p "$BIN"
  # GOTOOLCHAIN=local: the pinned Go builds it, never one the module would fetch for itself.
  GOTOOLCHAIN=local GOBIN="$BIN" GOFLAGS=-mod=mod "$GO" install \
    "sigs.k8s.io/kustomize/kustomize/v5@$VERSION" >&2
fi
exec "$KUSTOMIZE" "$@"

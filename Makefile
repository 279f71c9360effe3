# The black-box contract (README.md, docs/usage.md): run, up, down, test, bench, credentials,
# manifests; plus status, logs.
SHELL := /bin/bash
# The uv that make bootstrap installs (pinned, deploy/docker/uv-requirements.txt) comes first.
export PATH := $(CURDIR)/.local/uv/bin:$(PATH)
# uv never downloads a Python of its own: the machine's python3 (3.11) is the one.
export UV_PYTHON_DOWNLOADS := never
PY := uv run --frozen --no-sync python
STACK := $(PY) -m local_stack

.PHONY: backup restore test-fresh-root bootstrap bootstrap-local bootstrap-compose run up down restart status logs credentials manifests test test-unit lint typecheck docs bench chaos

# Installs what is missing (deploy/local/programs.txt): everything make test needs; the
# local stack's part alone; docker-compose.yml's under podman.
bootstrap:
	@bash deploy/local/bootstrap.sh test

bootstrap-local:
	@bash deploy/local/bootstrap.sh local

bootstrap-compose:
	@bash deploy/local/bootstrap.sh compose

run: bootstrap-local
	@$(STACK) run

up: bootstrap-local
	@$(STACK) up

down:
	@if command -v uv >/dev/null 2>&1 && [ -d .venv ]; then $(STACK) down; else echo "[stack] nothing to stop"; fi

# One part of the running stack (make status lists them): PART=identity, PART=pedidos, ...
restart:
	@if [ -z "$(PART)" ]; then echo "make restart PART=<part> (make status lists the parts)" >&2; exit 2; fi
	@$(STACK) restart $(PART)

status:
	@$(STACK) status

logs:
	@$(STACK) logs $(PART)

# A base backup of the local stack's PostgreSQL (.local/backup; WAL archived from then on), and
# its recovery to RESTORE_TARGET_TIME (ISO 8601, UTC unless it says; default: the latest),
# which replaces the data directory (the old one kept aside) and makes the saga consistent
# again (docs/operations.md, "Backups and point-in-time recovery").
backup:
	@$(STACK) backup

restore: bootstrap-local
	@$(STACK) restore

# The credentials the local stack generated for itself (.local/secrets), as one JSON object.
credentials:
	@$(STACK) credentials

# The Kubernetes manifests of the default overlay, one YAML stream on stdout (docs/deploy.md);
# kustomize is built at its pinned version on first use, its messages on stderr.
manifests:
	@bash deploy/k8s/kustomize.sh build deploy/k8s/overlays/default

# The whole suite: make lint first (seconds: a broken import contract fails before the stack
# starts), then starts the stack it needs, runs every test, stops the stack.
test: bootstrap
	@$(MAKE) --no-print-directory lint
	@bash deploy/local/run-tests.sh

# make test on a new machine: a Debian 12 root made with debootstrap for this run, with only the
# README's prerequisites installed in it (deploy/ci/fresh-root.sh; root).
test-fresh-root:
	@bash deploy/ci/fresh-root.sh make test

# The tests that need nothing but uv: no stack, no system package (make bootstrap is not run).
test-unit:
	@uv run --frozen pytest -m "not stack and not after_down and not external and not compose" -q

# ruff, then import-linter: the layers, no import cycle in sagakit, and the services on
# sagakit's public surface ([tool.importlinter] in pyproject.toml).
lint:
	@uv run --frozen --no-sync ruff check .
	@uv run --frozen --no-sync lint-imports --no-logo

typecheck:
	@uv run --frozen --no-sync mypy libs/sagakit/src libs/saga-contracts/src services/*/src tools/*/src

# The generated files (tests fail when they are out of date): configuration, event catalog and
# the generated part of the Kubernetes base.
docs:
	@$(PY) deploy/configuration.py
	@$(PY) -m saga_contracts.catalog docs/events.md
	@$(PY) deploy/k8s/generate.py

bench: bootstrap-local
	@$(PY) -m bench.run

chaos: bootstrap-local
	@$(PY) -m chaos

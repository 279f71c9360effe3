# The black-box contract (../shared/CONTRACT.md): run, up, down, test, bench, credentials,
# manifests; plus status, logs.
SHELL := /bin/bash
PY := uv run --frozen --no-sync python
STACK := $(PY) deploy/local/stack.py

.PHONY: bootstrap run up down status logs credentials manifests test test-unit lint typecheck docs bench chaos

bootstrap:
	@bash deploy/local/bootstrap.sh

run: bootstrap
	@$(STACK) run

up: bootstrap
	@$(STACK) up

down:
	@if command -v uv >/dev/null 2>&1 && [ -d .venv ]; then $(STACK) down; else echo "[stack] nothing to stop"; fi

status:
	@$(STACK) status

logs:
	@$(STACK) logs $(PART)

# The credentials the local stack generated for itself (.local/secrets), as one JSON object.
credentials:
	@$(STACK) credentials

# The Kubernetes manifests of the default overlay, one YAML stream on stdout (docs/deploy.md);
# kustomize is built at its pinned version on first use, its messages on stderr.
manifests:
	@bash deploy/k8s/kustomize.sh build deploy/k8s/overlays/default

# The whole suite: starts the stack it needs, runs every test, stops the stack.
test: bootstrap
	@bash deploy/local/run-tests.sh

# The tests that need nothing but uv: no stack, no system package (make bootstrap is not run).
test-unit:
	@uv run --frozen pytest -m "not stack and not after_down and not external and not compose" -q

lint:
	@uv run --frozen --no-sync ruff check .

typecheck:
	@uv run --frozen --no-sync mypy libs/sagakit/src libs/saga-contracts/src services/*/src tools/*/src

# The generated files (tests fail when they are out of date): configuration, event catalog and
# the generated part of the Kubernetes base.
docs:
	@$(PY) deploy/configuration.py
	@$(PY) -m saga_contracts.catalog docs/events.md
	@$(PY) deploy/k8s/generate.py

bench: bootstrap
	@$(PY) -m bench.run

chaos: bootstrap
	@$(PY) -m chaos

#!/usr/bin/env bash
# The whole test suite (`make test`): starts a fresh local stack with the test settings, runs
# every test against it, stops it, and then checks that nothing of the stack is left running.
set -uo pipefail
cd "$(dirname "$0")/../.."

# The test settings (tests that need shorter saga deadlines restart pedidos with them and
# restore it afterwards).
set -a
# shellcheck source=deploy/local/test.env
. deploy/local/test.env
set +a
export PYTHONUNBUFFERED=1

PY="uv run --frozen --no-sync python"
PYTEST="uv run --frozen --no-sync pytest"

$PY deploy/local/stack.py down >/dev/null 2>&1 || true
if ! $PY deploy/local/stack.py up; then
  echo "[test] the stack did not start; its logs:" >&2
  tail -n 50 .local/logs/*.log >&2 || true
  $PY deploy/local/stack.py down || true
  exit 1
fi

# The Kafka authentication tests need a stack with authentication (the default); one started
# with SAGA_KAFKA_AUTH=0 would fail them, as they must when the protection is missing.
# Likewise the PostgreSQL TLS tests need a stack started with SAGA_PG_TLS=1.
markers="not after_down"
[ "${SAGA_KAFKA_AUTH:-1}" != 0 ] || markers="$markers and not kafka_auth"
[ "${SAGA_PG_TLS:-}" = 1 ] || markers="$markers and not pg_tls"
$PYTEST -m "$markers" "$@"
rc=$?

if [ $rc -ne 0 ]; then
  echo "[test] failures: last lines of each part's log" >&2
  for f in .local/logs/*.log; do echo "== $f" >&2; tail -n 25 "$f" >&2; done
fi

$PY deploy/local/stack.py down
$PYTEST -m after_down -q
rc2=$?

[ $rc -ne 0 ] && exit $rc
exit $rc2

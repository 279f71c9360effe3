#!/usr/bin/env bash
# The whole test suite (`make test`): starts a fresh local stack with the test settings, runs
# every test against it, stops it; then the replica and broker-failure tests on a stack of two
# instances of every service and three Kafka brokers (in their reduced form: see below); then
# docker-compose.yml for real under podman; and then checks that nothing of the stack is left
# running. SAGA_TEST_REPLICA_PHASE=0 and SAGA_TEST_COMPOSE_PHASE=0 leave those phases out.
set -uo pipefail
cd "$(dirname "$0")/../.."

# The test settings (tests that need shorter saga deadlines restart pedidos with them and
# restore it afterwards). With CI=true the hung or cut-off instances of
# tests/e2e/test_hung_instances.py (both phases) stay so for 18 s instead of 60
# (HUNG_TEST_SECONDS), the paused consumer 13 s instead of 20: about 4½ minutes less.
set -a
# shellcheck source=deploy/local/test.env
. deploy/local/test.env
set +a
export PYTHONUNBUFFERED=1

PY="uv run --frozen --no-sync python"
PYTEST="uv run --frozen --no-sync pytest"

$PY -m local_stack down >/dev/null 2>&1 || true
if ! $PY -m local_stack up; then
  echo "[test] the stack did not start; its logs:" >&2
  tail -n 50 .local/logs/*.log >&2 || true
  $PY -m local_stack down || true
  exit 1
fi

# The Kafka authentication tests need a stack with authentication (the default); one started
# with SAGA_KAFKA_AUTH=0 would fail them, as they must when the protection is missing.
# Likewise the PostgreSQL TLS tests need a stack started with SAGA_PG_TLS=1.
markers="not after_down and not replicas and not brokers3 and not compose"
[ "${SAGA_KAFKA_AUTH:-1}" != 0 ] || markers="$markers and not kafka_auth"
[ "${SAGA_PG_TLS:-}" = 1 ] || markers="$markers and not pg_tls"
$PYTEST -m "$markers" "$@"
rc=$?

if [ $rc -ne 0 ]; then
  echo "[test] failures: last lines of each part's log" >&2
  for f in .local/logs/*.log; do echo "== $f" >&2; tail -n 25 "$f" >&2; done
fi

$PY -m local_stack down

# Second phase: SAGA_REPLICAS=2, SAGA_KAFKA_BROKERS=3 and SAGA_PG_TLS=1 (every service, relay
# and migration reaches PostgreSQL over TLS, sslmode=verify-full). Kafka's data is formatted for a number
# of brokers (the stack refuses data of another count), so the three brokers keep theirs under a
# home of their own, and the one-broker stack's stays as it was for the next run. Reduced for CI
# (about 4 minutes with the restarts): 150 orders in the replica test (600 in full), 12 s of
# orders at 20/s around the first broker's death (30 s in full), a 20-s hang of the relay's
# leader (30 s in full).
rc_replicas=0
if [ "${SAGA_TEST_REPLICA_PHASE:-1}" != 0 ]; then
  (
    export SAGA_REPLICAS=2 SAGA_KAFKA_BROKERS=3 SAGA_PG_TLS=1
    SAGA_KAFKA_HOME="$(realpath -m "${SAGA_STATE_DIR:-.local}")/kafka3"
    export SAGA_KAFKA_HOME
    export REPLICA_TEST_ORDERS="${REPLICA_TEST_ORDERS:-150}"
    export BROKER_TEST_SECONDS="${BROKER_TEST_SECONDS:-12}"
    export HUNG_LEADER_TEST_SECONDS="${HUNG_LEADER_TEST_SECONDS:-20}"
    if ! $PY -m local_stack up; then
      echo "[test] the stack of two replicas, three brokers and TLS did not start; its logs:" >&2
      tail -n 50 .local/logs/*.log >&2 || true
      $PY -m local_stack down || true
      exit 1
    fi
    phase_markers="replicas or brokers3 or pg_tls"
    [ "${SAGA_KAFKA_AUTH:-1}" != 0 ] || phase_markers="($phase_markers) and not kafka_auth"
    $PYTEST -m "$phase_markers" "$@"
    rc_phase=$?
    # Arguments that select none of these tests are not a failure of this phase.
    [ $rc_phase -eq 5 ] && rc_phase=0
    if [ $rc_phase -ne 0 ]; then
      echo "[test] failures with two replicas and three brokers: last lines of each log" >&2
      for f in .local/logs/*.log; do echo "== $f" >&2; tail -n 25 "$f" >&2; done
    fi
    $PY -m local_stack down
    exit $rc_phase
  )
  rc_replicas=$?
fi

# Third phase: docker-compose.yml run for real under podman (tools/compose-stack), with no local
# stack up: the offline images built (the first time about 2 minutes for the bases, then the
# services' images), `up --wait`, the README's "Try it" and the 40-order race, a down/up that
# keeps the data, `down -v`. SAGA_TEST_COMPOSE_PHASE=0 leaves it out.
rc_compose=0
if [ "${SAGA_TEST_COMPOSE_PHASE:-1}" != 0 ]; then
  $PYTEST -m compose "$@"
  rc_compose=$?
  [ $rc_compose -eq 5 ] && rc_compose=0
fi

$PYTEST -m after_down -q
rc2=$?

[ $rc -ne 0 ] && exit $rc
[ $rc_replicas -ne 0 ] && exit $rc_replicas
[ $rc_compose -ne 0 ] && exit $rc_compose
exit $rc2

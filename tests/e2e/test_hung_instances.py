"""An instance that hangs or is cut off without dying, under load: ``make chaos``'s
"paused-relay-leader", "relay-leader-cut-from-postgres", "relay-leader-cut-from-kafka" and
"paused-consumer" (and their "-x2"), shorter. Each is followed by the chaos suite's invariant
check and the time the sagas took to recover (``chaos.recovery``), which is printed:

- pedidos' relay leader (the instance whose /ready says it leads) paused by SIGSTOP;
- it cut off from PostgreSQL by a black hole (the TCP proxy holds the bytes both ways and
  leaves the connection open: no FIN or RST reaches the database) and, separately, from every
  Kafka broker: pedidos' instances reach both through the proxy for these, each instance by
  routes of its own;
- an inventario instance whose relay stands by (its consumer alone at stake) paused past the
  consumer group's session timeout.

With one instance of each service (``make test``'s first phase) the sagas must resume within
15 s of the fault's end. With two (its second phase: marked ``replicas``) they must keep moving
while it lasts: every saga's next step within 15 s of the fault.

The faults last HUNG_TEST_SECONDS (60 s, as ``make chaos``; 18 s when CI=true, still past the
bound), the consumer's pause 20 s (13 s when CI=true; its group's session timeout is 10 s).
Orders arrive at 5 a second from 3 s before the fault until 4 s after it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from chaos.recovery import BOUND_S
from chaos.scripted import CONSUMER_SESSION_TIMEOUT_S, PROXIED, Scripted, hung_or_cut_off
from saga_harness import replicas, stack
from saga_harness.faults import behind_proxy

CI = os.environ.get("CI") == "true"
SECONDS = float(os.environ.get("HUNG_TEST_SECONDS", "18" if CI else "60"))
CONSUMER_SECONDS = CONSUMER_SESSION_TIMEOUT_S + (3.0 if CI else 10.0)
RATE = 5.0
# Orders under way when the fault strikes, and arriving for a few seconds after it ends.
LEAD_IN_S, TAIL_S = 3.0, 4.0


def _require(instances: int) -> None:
    if replicas.replicas() != instances:
        pytest.fail(f"this test needs a stack of {instances} instance(s) of each service and "
                    "SAGA_REPLICAS set so in the tests' environment (deploy/local/run-tests.sh: "
                    f"one in its first phase, two in its second); SAGA_REPLICAS="
                    f"{os.environ.get('SAGA_REPLICAS')!r}")
    missing = [i.part for s in replicas.SERVICES for i in replicas.instances(s)
               if not stack.alive(i.part)]
    assert not missing, f"these instances are not running: {missing}"


async def _recovers(name: str, run: Scripted) -> None:
    report = await run.run(name, rate=RATE)
    print(report.render())
    assert report.acknowledged, "the load reached the stack"
    assert len(report.recoveries) == len(run.faults)
    assert not report.violations, report.render()
    for r in report.recoveries:
        assert r.sagas > 0, f"sagas were under way during {r.window.fault}"


def _paused_leader() -> Scripted:
    return hung_or_cut_off("pause", "pedidos@leader", SECONDS, PROXIED, LEAD_IN_S, TAIL_S)


def _cut_off_leader(dependency: str) -> Scripted:
    return hung_or_cut_off("blackhole", f"pedidos@leader-{dependency}", SECONDS, PROXIED,
                           LEAD_IN_S, TAIL_S)


def _paused_consumer() -> Scripted:
    return hung_or_cut_off("pause", "inventario@standby", CONSUMER_SECONDS, PROXIED,
                           LEAD_IN_S, TAIL_S)


@pytest.fixture(scope="module")
async def pedidos_behind_proxy(running_stack: None) -> AsyncIterator[None]:
    """Every pedidos instance through the TCP proxy, for the module's cut-off faults (the
    other tests do not need it: they come first in the module)."""
    async with behind_proxy([i.part for i in replicas.instances("pedidos")]):
        yield


# ---------------------------------------------------------------- one instance of each service

async def test_a_paused_relay_leader_resumes_the_sagas_within_the_bound(
        running_stack: None) -> None:
    _require(1)
    await _recovers("paused-relay-leader", _paused_leader())


async def test_a_paused_consumer_resumes_the_sagas_within_the_bound(
        running_stack: None) -> None:
    _require(1)
    await _recovers("paused-consumer", _paused_consumer())


@pytest.mark.parametrize("dependency", ["postgres", "kafka"])
async def test_a_relay_leader_cut_off_resumes_the_sagas_within_the_bound(
        dependency: str, pedidos_behind_proxy: None) -> None:
    _require(1)
    await _recovers(f"relay-leader-cut-from-{dependency}", _cut_off_leader(dependency))


# ------------------------------------------------------ two instances: the survivors take over

@pytest.mark.replicas
async def test_sagas_keep_moving_while_the_relay_leader_is_paused(running_stack: None) -> None:
    _require(2)
    await _recovers("paused-relay-leader-x2", _paused_leader())


@pytest.mark.replicas
async def test_sagas_keep_moving_while_a_consumer_is_paused(running_stack: None) -> None:
    _require(2)
    await _recovers("paused-consumer-x2", _paused_consumer())


@pytest.mark.replicas
@pytest.mark.parametrize("dependency", ["postgres", "kafka"])
async def test_sagas_keep_moving_while_the_relay_leader_is_cut_off(
        dependency: str, pedidos_behind_proxy: None) -> None:
    _require(2)
    await _recovers(f"relay-leader-cut-from-{dependency}-x2", _cut_off_leader(dependency))


def test_the_faults_outlast_the_bound() -> None:
    """A fault shorter than the bound would prove nothing about the survivors taking over."""
    assert SECONDS > BOUND_S and CONSUMER_SECONDS > CONSUMER_SESSION_TIMEOUT_S

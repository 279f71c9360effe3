"""The payment gateway failing slowly or strangely under load (``make chaos``'s
"gateway-outage" and "gateway-garbled", shorter), each followed by the chaos suite's invariant
check on the three databases and the gateway's ledger.

- Down for longer than the payment step's deadline while orders arrive, then back: charges
  fail, orders are cancelled at their deadline while the gateway is still down, and pagos must
  find out what became of each charge once it answers again. Every order ends by itself, money
  balances, and no payment is left for a refund by hand: the gateway came back in time to say.
  pedidos is restarted with a payment step of 6 s (and the deadline scanner looking every
  0.2 s); pagos keeps the test settings (deploy/local/test.env: calls time out after 2 s,
  retried after 0.5, 1 and 2 s) and reaches the gateway through the TCP proxy of
  tools/netproxy, whose route refuses and resets every connection while the gateway is down.
- Answering a quarter of pagos' calls with an HTML page of a proxy after forwarding them (the
  charge may have been made) and another quarter with garbage without forwarding them, then
  every call after pagos' timeout: through the proxy again, with pedidos' payment step of
  6 s (a charge whose every attempt was answered so fails, and its order is cancelled at that
  deadline). Every order ends, money balances (pagos' payments agree with the ledger: no
  charge kept without an order that keeps it, none twice), and every call so answered is in
  its payment's attempt log as a call whose outcome was not understood.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest

from chaos.scripted import Timings, gateway_garbled, gateway_outage
from saga_harness.faults import behind_proxy, reconfigured

RATE = 5.0
PAYMENT_DEADLINE_S = 6.0
SHORT_PAYMENT_STEP = {"SAGA_ALLOW_UNSAFE_LIMITS": "1",
                      "PEDIDOS_PAYMENT_TIMEOUT_S": f"{PAYMENT_DEADLINE_S:g}",
                      "PEDIDOS_DEADLINE_SCAN_INTERVAL_S": "0.2"}


@pytest.fixture(scope="module")
async def gateway_behind_proxy(running_stack: None) -> AsyncIterator[None]:
    """pedidos with a payment step of 6 s, pagos reaching the gateway through the proxy: for
    both tests, restarted once."""
    with reconfigured("pedidos", SHORT_PAYMENT_STEP):
        async with behind_proxy(["pagos"]):
            yield


async def test_a_gateway_down_past_the_payment_deadline_leaves_nothing_for_manual_refund(
        gateway_behind_proxy: None) -> None:
    timings = dataclasses.replace(Timings.of_environment(),
                                  payment_deadline_s=PAYMENT_DEADLINE_S)
    report = await gateway_outage(timings).run("gateway-outage", rate=RATE)
    print(report.render())
    assert report.acknowledged, "orders were placed during the outage"
    assert not report.violations, report.render()
    assert report.outcomes.get("CANCELADA_TIMEOUT", 0) > 0, \
        "orders reached their payment deadline while the gateway was down"


async def test_a_gateway_answering_pages_garbage_and_late_keeps_the_money_right(
        gateway_behind_proxy: None) -> None:
    report = await gateway_garbled(Timings.of_environment(), garble_s=8.0).run(
        "gateway-garbled", rate=RATE)
    print(report.render())
    assert report.acknowledged
    assert report.garbled_calls > 0, "the proxy answered some calls in the gateway's place"
    assert not report.violations, report.render()
    assert report.outcomes.get("COMPLETADA", 0) > 0

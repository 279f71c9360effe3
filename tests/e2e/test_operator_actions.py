"""An operator's actions through the services' APIs, audited with who and why, as the operator
sees them through sagactl (which reads the published views as sagactl_reader and calls the
APIs with an operator's token): a cancellation with a reason, a validation step retried, a
payment left for a manual refund resolved under finance's reference. A customer's token is
refused for each (403)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from saga_harness import config
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.faults import paused
from saga_harness.identity import bearer, customer_token, token
from saga_harness.scenarios import refund_left_for_manual_action
from saga_harness.waiting import wait_for


@pytest.fixture
async def http(running_stack: None) -> AsyncIterator[httpx.AsyncClient]:
    """A client that sends only the token each request names."""
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


def sagactl(*args: str, operator: str) -> Any:
    """sagactl's JSON answer, as ``operator`` (its token's subject)."""
    done = subprocess.run([sys.executable, "-m", "sagactl.cli", *args, "--output", "json"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SAGACTL_TOKEN": token(operator, ("operator",))})
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def _operator() -> str:
    return f"ops-{uuid.uuid4().hex[:8]}"


async def test_an_operator_cancels_giving_a_reason_and_the_history_says_who_and_why(
        saga: Saga, http: httpx.AsyncClient) -> None:
    sku, who = new_sku(), _operator()
    await saga.set_stock(sku, 5)
    as_operator = bearer(token(who, ("operator",)))
    with paused("inventario"):
        placed = await saga.place(order_body([(sku, 1)]))
        cancel = f"{config.PEDIDOS}/sagas/{placed['saga_id']}/cancel"
        blank = await http.post(cancel, json={"reason": "  "}, headers=as_operator)
        assert blank.status_code == 422, blank.text
        assert blank.json()["detail"][0]["loc"] == ["body", "reason"]
        done = await http.post(cancel, json={"reason": "customer asked by phone"},
                               headers=as_operator)
        assert done.status_code == 202, done.text
        # The contract's cancel takes no body: an operator's is recorded all the same, with
        # no reason.
        other = await saga.place(order_body([(sku, 1)]))
        bare = await http.post(f"{config.PEDIDOS}/sagas/{other['saga_id']}/cancel",
                               headers=as_operator)
        assert bare.status_code == 202, bare.text
    history = (await http.get(f"{config.PEDIDOS}/sagas/{placed['saga_id']}/history",
                              headers=as_operator)).json()
    [action] = history["operator_actions"]
    assert (action["operator"], action["action"], action["reason"]) == (
        who, "saga_cancelled", "customer asked by phone")
    assert any(e["actor"] == f"operator:{who}" and e["to_status"] == "CANCELADA_POR_USUARIO"
               for e in history["entries"])
    # The customer sees its saga's history, not who operated on it.
    owner = (await saga.order(placed["order_id"]))["customer_id"]
    theirs = (await http.get(f"{config.PEDIDOS}/sagas/{placed['saga_id']}/history",
                             headers=bearer(customer_token(owner)))).json()
    assert theirs["operator_actions"] == []
    recorded = (await http.get(f"{config.PEDIDOS}/sagas/{other['saga_id']}/history",
                               headers=as_operator)).json()["operator_actions"]
    assert [(a["operator"], a["reason"]) for a in recorded] == [(who, None)]
    # sagactl's timeline, through the views, shows it too.
    timeline = sagactl("timeline", placed["saga_id"], operator=who)
    assert any(e["what"] == "operator saga_cancelled" and who in e["detail"]
               and "customer asked by phone" in e["detail"] for e in timeline), timeline


async def test_sagactl_cancels_with_a_reason_as_the_operator_it_speaks_for(saga: Saga) -> None:
    sku, who = new_sku(), _operator()
    await saga.set_stock(sku, 5)
    with paused("inventario"):
        placed = await saga.place(order_body([(sku, 1)]))
        answer = sagactl("cancel", placed["saga_id"], "--reason", "duplicate order",
                         operator=who)
    assert answer == {"http_status": 202, "saga_id": placed["saga_id"],
                      "status": "CANCELADA_POR_USUARIO"}, answer
    [action] = [a for a in (await saga.http.get(
        f"{config.PEDIDOS}/sagas/{placed['saga_id']}/history")).json()["operator_actions"]]
    assert (action["operator"], action["reason"]) == (who, "duplicate order")
    again = sagactl("cancel", placed["saga_id"], "--reason", "again", operator=who)
    assert (again["http_status"], again["status"]) == (409, "CANCELADA_POR_USUARIO"), again


async def test_retrying_validation_sends_the_order_again_and_it_is_charged_once(
        saga: Saga, http: httpx.AsyncClient) -> None:
    sku, who = new_sku(), _operator()
    await saga.set_stock(sku, 5)
    with paused("inventario"):
        placed = await saga.place(order_body([(sku, 2)]))
        retried = sagactl("retry", placed["saga_id"], "--reason", "inventario was stuck",
                          operator=who)
        assert (retried["http_status"], retried["status"], retried["step"]) == (
            202, "PENDIENTE_VALIDACION", "validacion"), retried
    order = await saga.wait_terminal(placed["order_id"], timeout=30)
    assert order["status"] == "COMPLETADA"
    assert await saga.money_of(placed["saga_id"]) == (Decimal("10.00"), 1, 0)
    await wait_for(lambda: saga.stock(sku), lambda q: q == 3, timeout=10,
                   what="the stock taken once")
    consumed = [e for e in sagactl("timeline", placed["saga_id"], operator=who)
                if e["where"] == "inventario" and e["what"] == "consumed"
                and e["detail"].startswith("OrdenSolicitada")]
    assert len(consumed) == 2 and retried["message_id"] in " ".join(e["detail"]
                                                                     for e in consumed)
    [action] = (await http.get(f"{config.PEDIDOS}/sagas/{placed['saga_id']}/history",
                               headers=bearer(token(who, ("operator",))))
                ).json()["operator_actions"]
    assert (action["action"], action["reason"], action["detail"]["message_id"]) == (
        "step_retried", "inventario was stuck", retried["message_id"])
    # A saga that ended has nothing to retry; a step another service drives cannot be.
    late = sagactl("retry", placed["saga_id"], operator=who)
    assert (late["http_status"], late["status"]) == (409, "COMPLETADA"), late



async def _gauge_needing_action(saga: Saga) -> float:
    text = (await saga.http.get(f"{config.PAGOS}/metrics")).text
    [line] = [x for x in text.splitlines()
              if x.startswith('saga_payments_needing_action{service="pagos"}')]
    return float(line.rsplit(" ", 1)[1])


async def _gauge_agrees_with_the_view(saga: Saga, who: str) -> float:
    """The gauge, once it counts what payments_needing_action_v1 lists (it is refreshed every
    few seconds)."""
    listed = len(sagactl("payments", "--needing-action", "--limit", "10000", operator=who))
    return await wait_for(lambda: _gauge_needing_action(saga), lambda v: v == listed,
                          timeout=15, what=f"saga_payments_needing_action at {listed}")


async def test_an_operator_resolves_a_payment_left_for_a_manual_refund(
        saga: Saga, http: httpx.AsyncClient) -> None:
    who = _operator()
    placed = await refund_left_for_manual_action(saga)
    before = await _gauge_agrees_with_the_view(saga, who)
    assert before >= 1
    [needing] = sagactl("payments", "--needing-action", "--saga", placed["saga_id"],
                        operator=who)
    assert needing["status"] == "REFUND_FAILED" and needing["amount"] == "5.00"
    payment_id = needing["payment_id"]
    resolution = f"{config.PAGOS}/payments/{payment_id}/resolution"

    owner = (await saga.order(placed["order_id"]))["customer_id"]
    refused = await http.post(resolution, json={"reference": "FIN-1"},
                              headers=bearer(customer_token(owner)))
    assert refused.status_code == 403, refused.text
    assert (await http.post(resolution, json={"note": "no reference"},
                            headers=bearer(token(who, ("operator",))))).status_code == 422

    reference = f"FIN-{uuid.uuid4().hex[:6]}"
    done = sagactl("resolve-payment", payment_id, "--reference", reference, "--note",
                   "refunded by bank transfer", operator=who)
    assert (done["http_status"], done["resolved_by"], done["reference"], done["note"]) == (
        201, who, reference, "refunded by bank transfer"), done
    again = sagactl("resolve-payment", payment_id, "--reference", reference, operator=who)
    assert (again["http_status"], again["resolved_at"]) == (200, done["resolved_at"])
    other = sagactl("resolve-payment", payment_id, "--reference", "FIN-OTHER", operator=who)
    assert other["http_status"] == 409 and other["resolution"]["reference"] == reference

    assert sagactl("payments", "--needing-action", "--saga", placed["saga_id"],
                   operator=who) == []
    [payment] = sagactl("payments", "--saga", placed["saga_id"], operator=who)
    assert (payment["resolution_reference"], payment["resolved_by"]) == (reference, who)
    assert payment["status"] == "REFUND_FAILED", "what happened to it stays as it was"
    assert await _gauge_agrees_with_the_view(saga, who) == before - 1
    assert any(e["what"] == "operator payment_resolved" and who in e["detail"]
               and "refunded by bank transfer" in e["detail"]
               for e in sagactl("timeline", placed["saga_id"], operator=who))


async def test_a_payment_that_needs_no_one_is_not_resolved(saga: Saga) -> None:
    sku, who = new_sku(), _operator()
    await saga.set_stock(sku, 1)
    placed = await saga.place(order_body([(sku, 1)]))
    assert (await saga.wait_terminal(placed["order_id"]))["status"] == "COMPLETADA"
    [payment] = await saga.payments(placed["saga_id"])
    answer = sagactl("resolve-payment", payment["payment_id"], "--reference", "FIN-X",
                     operator=who)
    assert (answer["http_status"], answer["status"]) == (409, "CAPTURED"), answer
    missing = sagactl("resolve-payment", str(uuid.uuid4()), "--reference", "FIN-X",
                      operator=who)
    assert missing["http_status"] == 404


async def test_a_customer_token_is_refused_for_every_operator_action(
        saga: Saga, http: httpx.AsyncClient) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 0)
    placed = await saga.place(order_body([(sku, 1)]))
    owner = (await saga.order(placed["order_id"]))["customer_id"]
    as_customer = bearer(customer_token(owner))
    retry = await http.post(f"{config.PEDIDOS}/sagas/{placed['saga_id']}/retry",
                            json={"reason": "mine"}, headers=as_customer)
    assert retry.status_code == 403, retry.text
    resolve = await http.post(f"{config.PAGOS}/payments/{uuid.uuid4()}/resolution",
                              json={"reference": "R"}, headers=as_customer)
    assert resolve.status_code == 403, resolve.text

"""The DBOS peer against the stack's real PostgreSQL and fake gateway: the saga's outcomes,
its idempotent front door, and its money against the gateway's ledger."""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from peer_dbos.launcher import PeerProcess
from peer_dbos.settings import APP_SCHEMA, system_schema
from saga_harness import config
from saga_harness.identity import bearer, customer_token

pytestmark = pytest.mark.stack

PORT = 8940


def _secret_key() -> str:
    return config.gateway_auth()["Authorization"].removeprefix("Bearer ")


@pytest.fixture(scope="module", params=["single", "single/async", "per_core", "queue"])
def peer(request: pytest.FixtureRequest) -> Iterator[PeerProcess]:
    shape, _, style = request.param.partition("/")
    with PeerProcess(shape, database_url=config.admin_dsn(),
                     gateway_secret_key=_secret_key(), gateway_url=config.GATEWAY,
                     port=PORT, settings={"style": style or "sync"}) as running:
        yield running


@pytest.fixture
def db() -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(config.admin_dsn(), autocommit=True) as conn:
        yield conn


def stock(db: psycopg.Connection[Any], quantity: int) -> str:
    sku = f"PEER-{uuid.uuid4().hex[:10]}"
    db.execute(f"INSERT INTO {APP_SCHEMA}.products VALUES (%s, %s, 9.99, 'USD')",
               (sku, quantity))
    return sku


def order(peer: PeerProcess, sku: str, token: str = "tok_visa", *, customer: str = "peer-c1",
          key: str | None = None, quantity: int = 1) -> str:
    headers = bearer(customer_token(customer))
    if key:
        headers["Idempotency-Key"] = key
    response = httpx.post(f"{peer.url}/orders", headers=headers, timeout=10, json={
        "items": [{"sku": sku, "quantity": quantity, "price": "9.99"}], "currency": "USD",
        "shipping_address": {"street": "s", "city": "c", "country": "PE", "postal_code": "1"},
        "payment_method": {"type": "credit_card", "token": token}})
    assert response.status_code == 202, response.text
    assert response.headers["Location"] == f"/orders/{response.json()['order_id']}"
    return str(response.json()["order_id"])


def status_of(db: psycopg.Connection[Any], order_id: str) -> str | None:
    row = db.execute(f"SELECT status FROM {APP_SCHEMA}.orders WHERE order_id = %s",
                     (order_id,)).fetchone()
    return None if row is None else str(row[0])


def wait_status(db: psycopg.Connection[Any], order_id: str, *wanted: str,
                timeout_s: float = 20) -> str:
    deadline = time.monotonic() + timeout_s
    seen = None
    while time.monotonic() < deadline:
        seen = status_of(db, order_id)
        if seen in wanted:
            return seen
        time.sleep(0.05)  # the order's row, polled until its deadline
    raise AssertionError(f"order {order_id} is {seen}, not {wanted} after {timeout_s} s")


def ledger() -> dict[str, Any]:
    response = httpx.get(f"{config.GATEWAY}/ledger", headers=config.gateway_auth(), timeout=10)
    response.raise_for_status()
    return dict(response.json())


def charges_of(order_id: str) -> list[dict[str, Any]]:
    return [c for c in ledger()["charges"] if c["idempotency_key"] == f"peer-charge-{order_id}"]


def test_an_order_completes_and_is_charged_once(peer: PeerProcess,
                                                db: psycopg.Connection[Any]) -> None:
    sku = stock(db, 5)
    order_id = order(peer, sku)
    assert wait_status(db, order_id, "COMPLETADA") == "COMPLETADA"
    [charge] = charges_of(order_id)
    assert (charge["status"], charge["amount"], charge["amount_refunded"]) == (
        "succeeded", 999, 0)
    assert db.execute(f"SELECT quantity FROM {APP_SCHEMA}.products WHERE sku = %s",
                      (sku,)).fetchone() == (4,)


def test_a_decline_ends_cancelled_with_no_charge_kept(peer: PeerProcess,
                                                      db: psycopg.Connection[Any]) -> None:
    sku = stock(db, 5)
    order_id = order(peer, sku, "tok_chargeDeclined")
    wait_status(db, order_id, "CANCELADA_PAGO_RECHAZADO")
    assert [c["status"] for c in charges_of(order_id)] == ["failed"]
    assert db.execute(f"SELECT quantity FROM {APP_SCHEMA}.products WHERE sku = %s",
                      (sku,)).fetchone() == (5,)


def test_out_of_stock_at_the_check_charges_nothing(peer: PeerProcess,
                                                   db: psycopg.Connection[Any]) -> None:
    order_id = order(peer, stock(db, 0))
    wait_status(db, order_id, "CANCELADA_SIN_STOCK")
    assert charges_of(order_id) == []


def test_an_allocation_that_lost_the_race_is_refunded(peer: PeerProcess,
                                                      db: psycopg.Connection[Any]) -> None:
    """The first order passes the check and waits on its charge (the gateway fails it three
    times, each retried after a pause); the second takes the last unit meanwhile."""
    sku = stock(db, 1)
    slow = order(peer, sku, "tok_transient3")
    wait_status(db, slow, "PENDIENTE_PAGO")
    fast = order(peer, sku, customer="peer-c2")
    wait_status(db, fast, "COMPLETADA")
    wait_status(db, slow, "CANCELADA_CON_REEMBOLSO")
    [charge] = charges_of(slow)
    assert charge["amount_refunded"] == charge["amount"] == 999
    assert [r["amount"] for r in ledger()["refunds"]
            if r["idempotency_key"] == f"peer-refund-{slow}"] == [999]
    assert db.execute(f"SELECT quantity FROM {APP_SCHEMA}.products WHERE sku = %s",
                      (sku,)).fetchone() == (0,)


def test_the_same_order_posted_twice_starts_one_workflow(peer: PeerProcess,
                                                         db: psycopg.Connection[Any]) -> None:
    sku = stock(db, 5)
    key = uuid.uuid4().hex
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        ids = set(pool.map(lambda _: order(peer, sku, key=key), range(4)))
    assert len(ids) == 1
    [order_id] = ids
    wait_status(db, order_id, "COMPLETADA")
    # Posted again once it ended: the same order, nothing started.
    assert order(peer, sku, key=key) == order_id
    assert db.execute(f"SELECT count(*) FROM {system_schema(peer.shape)}.workflow_status "
                      "WHERE workflow_uuid = %s", (order_id,)).fetchone() == (1,)
    assert len(charges_of(order_id)) == 1
    assert db.execute(f"SELECT quantity FROM {APP_SCHEMA}.products WHERE sku = %s",
                      (sku,)).fetchone() == (4,)
    # Another customer's same key is another order.
    assert order(peer, sku, key=key, customer="peer-c2") != order_id


def test_bad_requests_are_refused_as_pedidos_refuses_them(peer: PeerProcess) -> None:
    assert httpx.post(f"{peer.url}/orders", json={}, timeout=10).status_code == 401
    response = httpx.post(f"{peer.url}/orders", json={"items": []}, timeout=10,
                          headers=bearer(customer_token("peer-c1")))
    assert response.status_code == 422
    assert {tuple(d["loc"]) for d in response.json()["detail"]} >= {
        ("body", "items"), ("body", "currency")}


def test_the_money_balances_against_the_gateways_ledger(peer: PeerProcess,
                                                        db: psycopg.Connection[Any]) -> None:
    """A mix of approvals, declines and orders for more than there is, placed at once: every
    completed order is charged its total once and keeps it; every other keeps nothing."""
    sku = stock(db, 6)
    tokens = ["tok_visa"] * 10 + ["tok_chargeDeclined", "tok_chargeDeclinedInsufficientFunds"]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        ids = list(pool.map(lambda t: order(peer, sku, t, customer=f"peer-m{uuid.uuid4().hex[:6]}"),
                            tokens))
    terminal = ("COMPLETADA", "CANCELADA_SIN_STOCK", "CANCELADA_PAGO_RECHAZADO",
                "CANCELADA_CON_REEMBOLSO")
    statuses = {i: wait_status(db, i, *terminal) for i in ids}
    assert list(statuses.values()).count("COMPLETADA") == 6
    by_key = {c["idempotency_key"]: c for c in ledger()["charges"]}
    for order_id, status in statuses.items():
        charge = by_key.get(f"peer-charge-{order_id}")
        kept = 0 if charge is None or charge["status"] != "succeeded" else (
            charge["amount"] - charge["amount_refunded"])
        assert kept == (999 if status == "COMPLETADA" else 0), (order_id, status, charge)
    assert db.execute(f"SELECT quantity FROM {APP_SCHEMA}.products WHERE sku = %s",
                      (sku,)).fetchone() == (0,)

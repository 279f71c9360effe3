"""Check-Then-Pay as one DBOS workflow: check the stock without locking, charge at the gateway,
allocate under ``SELECT ... FOR UPDATE``, refund when the allocation lost the race.

The database steps are datasource transactions: DBOS writes each one's checkpoint in the same
PostgreSQL transaction as its rows, so a step runs exactly once even when a workflow is
recovered. They run at READ COMMITTED (DBOS's default is SERIALIZABLE): the allocation's row
lock is what keeps stock from going negative, as in inventario. The gateway calls are steps
with retries that never retry a refusal (a 4xx), and the gateway's idempotency keys make a
repeated call harmless.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, SQLAlchemyDatasource

from peer_dbos.gateway import Gateway, GatewayRefused
from peer_dbos.settings import APP_SCHEMA, WORKFLOW, PeerSettings
from saga_contracts.minor_units import to_minor_units

log = logging.getLogger("peer_dbos.saga")

_S = APP_SCHEMA


def _not_refused(exc: BaseException) -> bool:
    return not isinstance(exc, GatewayRefused)


# The saga's statements, shared by the synchronous style (here) and the async one
# (saga_async.py).
INSERT_ORDER = sa.text(
    f"INSERT INTO {_S}.orders (order_id, customer_id, items, total_minor, currency, status) "
    "VALUES (:id, :customer, CAST(:items AS jsonb), :total, :currency, 'PENDIENTE_VALIDACION')")
READ_CATALOGUE = sa.text(
    f"SELECT sku, quantity, price, currency FROM {_S}.products WHERE sku = ANY(:skus)")
AFTER_CHECK = sa.text(
    f"UPDATE {_S}.orders SET status = :status, "
    "finished_at = CASE WHEN :terminal THEN now() END WHERE order_id = :id")
LOCK_STOCK = sa.text(
    f"SELECT sku, quantity FROM {_S}.products WHERE sku = ANY(:skus) ORDER BY sku FOR UPDATE")
TAKE_STOCK = sa.text(
    f"UPDATE {_S}.products p SET quantity = p.quantity - w.qty FROM "
    "unnest(CAST(:skus AS text[]), CAST(:qtys AS int[])) AS w(sku, qty) WHERE p.sku = w.sku")
AFTER_ALLOCATION = sa.text(
    f"UPDATE {_S}.orders SET status = :status, charge_id = :charge, "
    "finished_at = CASE WHEN :done THEN now() END WHERE order_id = :id")
FINISH = sa.text(
    f"UPDATE {_S}.orders SET status = :status, charge_id = coalesce(:charge, charge_id), "
    "finished_at = now() WHERE order_id = :id")


def total_minor(order: dict[str, Any]) -> int:
    total = sum(Decimal(i["price"]) * i["quantity"] for i in order["items"])
    return to_minor_units(total, order["currency"])


def order_row(order_id: str, order: dict[str, Any]) -> dict[str, Any]:
    return {"id": order_id, "customer": order["customer_id"], "items": json.dumps(order["items"]),
            "total": total_minor(order), "currency": order["currency"]}


def check_verdict(order: dict[str, Any], rows: Sequence[Any]) -> str | None:
    """The terminal status of an order the catalogue cannot serve as asked, or None."""
    catalogue = {r.sku: r for r in rows}
    for item in order["items"]:
        product = catalogue.get(item["sku"])
        if product is None or product.quantity < item["quantity"]:
            return "CANCELADA_SIN_STOCK"
        if product.price != Decimal(item["price"]) or product.currency != order["currency"]:
            return "CANCELADA_PRECIO_RECHAZADO"
    return None


def wanted(items: list[dict[str, Any]]) -> dict[str, int]:
    # Sorted by sku: two orders lock their products in one order, never in a deadlock.
    return dict(sorted((i["sku"], int(i["quantity"])) for i in items))


def enough(want: dict[str, int], rows: Sequence[Any]) -> bool:
    return len(rows) == len(want) and all(r.quantity >= want[r.sku] for r in rows)


def register(settings: PeerSettings) -> Callable[[dict[str, Any]], str]:
    """Creates the datasource and registers the workflow and its steps with DBOS (before
    ``DBOS.launch``); returns the workflow."""
    ds = SQLAlchemyDatasource.create(
        settings.database_url.replace("postgresql://", "postgresql+psycopg://", 1),
        engine_kwargs={"pool_size": settings.datasource_pool_size, "max_overflow": 0},
        schema=APP_SCHEMA)
    gateway = Gateway(settings.gateway_url, settings.gateway_secret_key,
                      settings.gateway_timeout_s)

    @ds.transaction(name="check_stock", isolation_level="READ COMMITTED")
    def check_stock(order_id: str, order: dict[str, Any]) -> str | None:
        """Records the order and checks it against the catalogue without locking; the
        terminal status it ends in when it cannot be charged, or None."""
        session = ds.sql_session()
        session.execute(INSERT_ORDER, order_row(order_id, order))
        verdict = check_verdict(order, session.execute(
            READ_CATALOGUE, {"skus": [i["sku"] for i in order["items"]]}).all())
        session.execute(AFTER_CHECK, {"status": verdict or "PENDIENTE_PAGO",
                                      "terminal": verdict is not None, "id": order_id})
        return verdict

    @DBOS.step(name="charge", retries_allowed=True, max_attempts=4, interval_seconds=0.2,
               backoff_rate=2.0, should_retry=_not_refused)
    def charge(order_id: str, amount_minor: int, currency: str, token: str) -> dict[str, Any]:
        outcome = gateway.charge(order_id, amount_minor, currency, token)
        return {"charge_id": outcome.charge_id, "decline_code": outcome.decline_code}

    @DBOS.step(name="refund", retries_allowed=True, max_attempts=5, interval_seconds=0.2,
               backoff_rate=2.0, should_retry=_not_refused)
    def refund(order_id: str, charge_id: str) -> str:
        return gateway.refund(order_id, charge_id)

    @ds.transaction(name="allocate", isolation_level="READ COMMITTED")
    def allocate(order_id: str, items: list[dict[str, Any]], charge_id: str) -> bool:
        """Takes the stock under the products' row locks; False when another order took it
        since the check."""
        session = ds.sql_session()
        want = wanted(items)
        taken = enough(want, session.execute(LOCK_STOCK, {"skus": list(want)}).all())
        if taken:
            session.execute(TAKE_STOCK, {"skus": list(want), "qtys": list(want.values())})
        session.execute(AFTER_ALLOCATION, {
            "status": "COMPLETADA" if taken else "PENDIENTE_REEMBOLSO", "charge": charge_id,
            "done": taken, "id": order_id})
        return taken

    @ds.transaction(name="finish", isolation_level="READ COMMITTED")
    def finish(order_id: str, status: str, charge_id: str | None) -> str:
        ds.sql_session().execute(FINISH, {"status": status, "charge": charge_id, "id": order_id})
        return status

    @DBOS.workflow(name=WORKFLOW)
    def check_then_pay(order: dict[str, Any]) -> str:
        order_id = DBOS.workflow_id
        assert order_id is not None
        verdict = check_stock(order_id, order)
        if verdict is not None:
            return verdict
        try:
            charged = charge(order_id, total_minor(order), order["currency"],
                             order["payment_method"]["token"])
        except Exception as exc:  # retries spent or refused: nothing was charged that we know of
            log.warning("charge of %s failed: %s", order_id, exc)
            return finish(order_id, "CANCELADA_TIMEOUT", None)
        if charged["decline_code"] is not None:
            return finish(order_id, "CANCELADA_PAGO_RECHAZADO", charged["charge_id"])
        if allocate(order_id, order["items"], charged["charge_id"]):
            return "COMPLETADA"
        # Compensation: the stock went to another order between the check and the allocation.
        try:
            refund(order_id, charged["charge_id"])
        except Exception as exc:
            log.error("refund of %s failed: %s", order_id, exc)
            return finish(order_id, "REEMBOLSO_FALLIDO", None)
        return finish(order_id, "CANCELADA_CON_REEMBOLSO", None)

    return check_then_pay

"""The same saga in DBOS's async style: async datasource transactions, async steps with an
async HTTP client, the workflow a coroutine on DBOS's event loop (saga.py says what each step
does; the statements and decisions are the same)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from dbos import DBOS, AsyncSQLAlchemyDatasource

from peer_dbos.gateway import AsyncGateway
from peer_dbos.saga import (
    AFTER_ALLOCATION,
    AFTER_CHECK,
    FINISH,
    INSERT_ORDER,
    LOCK_STOCK,
    READ_CATALOGUE,
    TAKE_STOCK,
    _not_refused,
    check_verdict,
    enough,
    order_row,
    total_minor,
    wanted,
)
from peer_dbos.settings import APP_SCHEMA, WORKFLOW, PeerSettings

log = logging.getLogger("peer_dbos.saga")

Workflow = Callable[[dict[str, Any]], Coroutine[Any, Any, str]]


async def register_async(settings: PeerSettings) -> Workflow:
    """Creates the async datasource (on the running loop) and registers the workflow and its
    steps (before ``DBOS.launch``); returns the workflow."""
    ds = await AsyncSQLAlchemyDatasource.create(
        settings.database_url.replace("postgresql://", "postgresql+psycopg://", 1),
        engine_kwargs={"pool_size": settings.datasource_pool_size, "max_overflow": 0},
        schema=APP_SCHEMA)
    gateway = AsyncGateway(settings.gateway_url, settings.gateway_secret_key,
                           settings.gateway_timeout_s)

    @ds.transaction(name="check_stock", isolation_level="READ COMMITTED")
    async def check_stock(order_id: str, order: dict[str, Any]) -> str | None:
        session = ds.sql_session()
        await session.execute(INSERT_ORDER, order_row(order_id, order))
        verdict = check_verdict(order, (await session.execute(
            READ_CATALOGUE, {"skus": [i["sku"] for i in order["items"]]})).all())
        await session.execute(AFTER_CHECK, {"status": verdict or "PENDIENTE_PAGO",
                                            "terminal": verdict is not None, "id": order_id})
        return verdict

    @DBOS.step(name="charge", retries_allowed=True, max_attempts=4, interval_seconds=0.2,
               backoff_rate=2.0, should_retry=_not_refused)
    async def charge(order_id: str, amount_minor: int, currency: str, token: str
                     ) -> dict[str, Any]:
        outcome = await gateway.charge(order_id, amount_minor, currency, token)
        return {"charge_id": outcome.charge_id, "decline_code": outcome.decline_code}

    @DBOS.step(name="refund", retries_allowed=True, max_attempts=5, interval_seconds=0.2,
               backoff_rate=2.0, should_retry=_not_refused)
    async def refund(order_id: str, charge_id: str) -> str:
        return await gateway.refund(order_id, charge_id)

    @ds.transaction(name="allocate", isolation_level="READ COMMITTED")
    async def allocate(order_id: str, items: list[dict[str, Any]], charge_id: str) -> bool:
        session = ds.sql_session()
        want = wanted(items)
        taken = enough(want, (await session.execute(LOCK_STOCK, {"skus": list(want)})).all())
        if taken:
            await session.execute(TAKE_STOCK, {"skus": list(want), "qtys": list(want.values())})
        await session.execute(AFTER_ALLOCATION, {
            "status": "COMPLETADA" if taken else "PENDIENTE_REEMBOLSO", "charge": charge_id,
            "done": taken, "id": order_id})
        return taken

    @ds.transaction(name="finish", isolation_level="READ COMMITTED")
    async def finish(order_id: str, status: str, charge_id: str | None) -> str:
        await ds.sql_session().execute(FINISH, {"status": status, "charge": charge_id,
                                                "id": order_id})
        return status

    @DBOS.workflow(name=WORKFLOW)
    async def check_then_pay(order: dict[str, Any]) -> str:
        order_id = DBOS.workflow_id
        assert order_id is not None
        verdict = await check_stock(order_id, order)
        if verdict is not None:
            return verdict
        try:
            charged = await charge(order_id, total_minor(order), order["currency"],
                                   order["payment_method"]["token"])
        except Exception as exc:
            log.warning("charge of %s failed: %s", order_id, exc)
            return await finish(order_id, "CANCELADA_TIMEOUT", None)
        if charged["decline_code"] is not None:
            return await finish(order_id, "CANCELADA_PAGO_RECHAZADO", charged["charge_id"])
        if await allocate(order_id, order["items"], charged["charge_id"]):
            return "COMPLETADA"
        try:
            await refund(order_id, charged["charge_id"])
        except Exception as exc:
            log.error("refund of %s failed: %s", order_id, exc)
            return await finish(order_id, "REEMBOLSO_FALLIDO", None)
        return await finish(order_id, "CANCELADA_CON_REEMBOLSO", None)

    return check_then_pay

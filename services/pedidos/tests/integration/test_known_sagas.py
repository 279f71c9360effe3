"""pedidos decides a tracked event on the saga as its own last write returned it
(pedidos.adapters.known_sagas, wired as the composition root wires it), against real PostgreSQL,
in a scratch schema (a copy of pedidos' tables, so nothing reaches the running stack): a saga
placed and moved by this process is never read back, and a saga moved elsewhere meanwhile
(another instance, a cancellation) fails the write's guard, is forgotten, and the event is
decided again on the row as it is. What that saves is measured in the same run, with the cache
and without it."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pedidos.adapters.known_sagas import KnownSagas, OrderStores, cached_stores
from pedidos.adapters.order_repository import OrderRepository
from pedidos.config import PedidosSettings
from pedidos.entrypoints.messages import make_track_saga
from pedidos.usecases.cancel_saga import cancel_saga
from pedidos.usecases.fingerprints import Fingerprints
from pedidos.usecases.place_order import place_order
from pedidos.usecases.ports import SagaState
from saga_harness import db, sealing
from saga_harness.clients import new_sku, order_body
from saga_harness.events import message, payload_of
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork

SCHEMA = "trackingtest"
TABLES = ("orders", "sagas", "saga_audit", "notifications", "outbox", "processed_messages")


@pytest.fixture
async def scratch(running_stack: None) -> AsyncIterator[tuple[AsyncEngine, MessagingTables]]:
    async with db.scratch_copy(SCHEMA, "pedidos", TABLES) as copy:
        yield copy


class _Reads:
    """Counts the saga reads of the tracking handler (``OrderRepository.read``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = OrderRepository.read

        async def counted(repo: OrderRepository, saga_id: str) -> SagaState | None:
            self.count += 1
            return await original(repo, saga_id)

        monkeypatch.setattr(OrderRepository, "read", counted)


def _uow(engine: AsyncEngine, tables: MessagingTables, **options: Any) -> UnitOfWork:
    return UnitOfWork(engine, tables, "pedidos", **options)


async def _place(engine: AsyncEngine, tables: MessagingTables, stores: OrderStores) -> str:
    async with _uow(engine, tables) as uow:
        placed = await place_order(uow, stores(uow), order_body([(new_sku(), 2)]),
                                   Decimal("10.00"), None, PedidosSettings(),
                                   sealer=sealing.sealing_key(),
                                   fingerprints=Fingerprints(b"an integration test's key, 32 B+"))
    return placed.saga_id


async def _deliver(engine: AsyncEngine, tables: MessagingTables, stores: OrderStores,
                   saga_id: str, event_type: str, payload: dict[str, Any] | None = None
                   ) -> bool:
    """What the consumer does with one record, once: claim it, run the handler, commit. False
    if the handler's write found the saga moved (the consumer then runs it again)."""
    event = message(event_type, saga_id,
                    payload_of(event_type, str(uuid.uuid4()), **(payload or {})))
    handler = make_track_saga(PedidosSettings(), stores)
    async with _uow(engine, tables, reads_outside_transaction=True) as uow:
        uow.claim(event.message_id, event.event_type, event.saga_id)
        await handler(uow, event)
        return uow.committed


async def _saga(engine: AsyncEngine, saga_id: str) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(text(
            f"SELECT s.status, o.status AS order_status, o.charge_id, "
            f"(SELECT array_agg(event_type || ':' || coalesce(to_status, '') ORDER BY id) "
            f" FROM {SCHEMA}.saga_audit a WHERE a.saga_id = s.saga_id) AS history "
            f"FROM {SCHEMA}.sagas s JOIN {SCHEMA}.orders o USING (order_id) "
            f"WHERE s.saga_id = :s"), {"s": saga_id})).one()


async def test_a_saga_placed_and_moved_here_is_never_read_back(
        scratch: tuple[AsyncEngine, MessagingTables], monkeypatch: pytest.MonkeyPatch) -> None:
    engine, tables = scratch
    reads, known = _Reads(monkeypatch), KnownSagas()
    stores = cached_stores(known)
    saga_id = await _place(engine, tables, stores)
    assert known.get(saga_id) is not None and known.get(saga_id).status == "PENDIENTE_VALIDACION"

    assert await _deliver(engine, tables, stores, saga_id, "StockVerificado")
    assert await _deliver(engine, tables, stores, saga_id, "PagoExitoso", {"charge_id": "ch_1"})
    assert known.get(saga_id).status == "PENDIENTE_ASIGNACION"
    assert await _deliver(engine, tables, stores, saga_id, "StockAsignado")

    assert reads.count == 0, "every event decided on the row this process's last write returned"
    row = await _saga(engine, saga_id)
    assert (row.status, row.order_status, row.charge_id) == ("COMPLETADA", "COMPLETADA", "ch_1")
    assert row.history == ["OrdenSolicitada:PENDIENTE_VALIDACION",
                           "StockVerificado:PENDIENTE_PAGO",
                           "PagoExitoso:PENDIENTE_ASIGNACION", "StockAsignado:COMPLETADA"]
    assert known.get(saga_id) is None, "a terminal saga is not kept"


async def test_a_saga_moved_elsewhere_is_forgotten_and_the_event_decided_again(
        scratch: tuple[AsyncEngine, MessagingTables], monkeypatch: pytest.MonkeyPatch) -> None:
    engine, tables = scratch
    reads, here = _Reads(monkeypatch), KnownSagas()
    stores = cached_stores(here)
    saga_id = await _place(engine, tables, stores)
    assert await _deliver(engine, tables, stores, saga_id, "StockVerificado")
    assert here.get(saga_id).status == "PENDIENTE_PAGO"

    # Another instance (its own KnownSagas, which has never seen this saga) cancels it.
    async with _uow(engine, tables) as uow:
        await cancel_saga(uow, cached_stores(KnownSagas())(uow), saga_id, "api",
                          PedidosSettings())

    # Decided on PENDIENTE_PAGO, the payment would move the saga on: the guard finds the
    # status gone, nothing is written, and the saga is no longer taken as known.
    assert not await _deliver(engine, tables, stores, saga_id, "PagoExitoso",
                              {"charge_id": "ch_2"})
    assert here.get(saga_id) is None and reads.count == 0
    # The consumer's retry reads the row and records the late payment without moving it.
    assert await _deliver(engine, tables, stores, saga_id, "PagoExitoso", {"charge_id": "ch_2"})
    assert reads.count == 1
    row = await _saga(engine, saga_id)
    assert row.status == "CANCELADA_POR_USUARIO" == row.order_status
    assert row.history == ["OrdenSolicitada:PENDIENTE_VALIDACION",
                           "StockVerificado:PENDIENTE_PAGO",
                           "CancelacionSolicitada:CANCELADA_POR_USUARIO",
                           "PagoExitoso:CANCELADA_POR_USUARIO"]


_HAPPY = (("StockVerificado", None), ("PagoExitoso", {"charge_id": "ch_1"}),
          ("StockAsignado", None))
# What the scratch engine's role sent (the stack's services run as their own roles).
_SENT = """SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(total_exec_time), 0) AS ms
FROM pg_stat_statements WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = current_user)
AND query NOT LIKE '%pg_stat_statements%'"""


async def _driven(engine: AsyncEngine, tables: MessagingTables, stores: OrderStores,
                  saga_id: str) -> tuple[float, float]:
    """(wall, this process's CPU) milliseconds per event of the saga's three tracked events."""
    wall, cpu = time.perf_counter(), time.process_time()
    for event_type, payload in _HAPPY:
        assert await _deliver(engine, tables, stores, saga_id, event_type, payload)
    return ((time.perf_counter() - wall) * 1000 / len(_HAPPY),
            (time.process_time() - cpu) * 1000 / len(_HAPPY))


async def _sent_per_event(engine: AsyncEngine, tables: MessagingTables, stores: OrderStores,
                          sagas: int) -> tuple[float, float]:
    """(statements, PostgreSQL's execution milliseconds) per tracked event of ``sagas`` sagas
    placed through ``stores`` (pg_stat_statements, which the local stack loads)."""
    placed = [await _place(engine, tables, stores) for _ in range(sagas)]
    await db.execute("SELECT pg_stat_statements_reset()")
    for saga_id in placed:
        await _driven(engine, tables, stores, saga_id)
    [row] = await db.fetch(_SENT)
    events = sagas * len(_HAPPY)
    return float(row["calls"]) / events, float(row["ms"]) / events


async def test_the_cache_spares_a_read_per_tracked_event_measured_with_it_and_without(
        scratch: tuple[AsyncEngine, MessagingTables], monkeypatch: pytest.MonkeyPatch,
        record_property: Any) -> None:
    """The same events with the cache (as pedidos.app wires it) and without (``OrderRepository``
    alone), in the same run, saga by saga in alternated order so that the machine's drift falls
    on both: the reads are counted and asserted (none against one per event); the cost per
    event (statements and PostgreSQL's time, wall time and this process's CPU) is reported as a
    ratio of the two, not asserted (the machine's noise is not the code's)."""
    engine, tables = scratch
    reads, sagas = _Reads(monkeypatch), 40
    modes: dict[str, OrderStores] = {"cached": cached_stores(KnownSagas()),
                                     "uncached": OrderRepository}
    placed = {mode: [await _place(engine, tables, stores) for _ in range(sagas + 2)]
              for mode, stores in modes.items()}
    for mode, stores in modes.items():  # the pool and the statements' plans warmed
        await _driven(engine, tables, stores, placed[mode].pop())
    costs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
    for n in range(sagas):
        for mode in (("cached", "uncached") if n % 2 else ("uncached", "cached")):
            before = reads.count
            costs[mode].append(await _driven(engine, tables, modes[mode], placed[mode].pop()))
            assert reads.count - before == (0 if mode == "cached" else len(_HAPPY)), mode

    report: dict[str, dict[str, float]] = {}
    for mode, stores in modes.items():
        statements, pg_ms = await _sent_per_event(engine, tables, stores, 10)
        report[mode] = {"statements": statements, "pg_ms": pg_ms,
                        "wall_ms": statistics.median(c[0] for c in costs[mode]),
                        "cpu_ms": statistics.median(c[1] for c in costs[mode])}
    ratios = {k: report["cached"][k] / report["uncached"][k] for k in report["cached"]}
    record_property("per_tracked_event", {**report, "ratio": ratios})
    print("per tracked event, cached / uncached:", ", ".join(
        f"{k} {report['cached'][k]:.3f} / {report['uncached'][k]:.3f} = {ratios[k]:.2f}"
        for k in ratios))

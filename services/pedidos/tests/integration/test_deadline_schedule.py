"""The deadline scanner's schedule against real PostgreSQL: it knows when the earliest
deadline still to come falls due, and a deadline already past is due work, not a wake-up."""

from __future__ import annotations

from sqlalchemy import text

from pedidos.adapters.deadline_schedule import due_sagas, seconds_to_next_deadline
from saga_harness import db
from saga_harness.clients import Saga


async def test_the_scanner_knows_when_the_next_deadline_falls_due(saga: Saga) -> None:
    placed = await saga.settled_order(stock=0, status="CANCELADA_SIN_STOCK")
    async with db.probe() as conn:
        async def make_active(deadline: str) -> None:
            await conn.execute(text(
                "UPDATE pedidos.sagas SET status = 'PENDIENTE_PAGO', "
                f"step_deadline_at = now() + interval '{deadline}' WHERE saga_id = :s"),
                {"s": placed["saga_id"]})

        # Sooner than any real deadline (the shortest step timeout is 15 s).
        await make_active("300 milliseconds")
        seconds = await seconds_to_next_deadline(conn)
        assert seconds is not None and 0 < seconds <= 0.3
        assert placed["saga_id"] not in await due_sagas(conn, 1000)

        await make_active("-1 second")
        assert placed["saga_id"] in await due_sagas(conn, 1000)
        seconds = await seconds_to_next_deadline(conn)
        assert seconds is None or seconds > 0, "a past deadline is work, not a wake-up"

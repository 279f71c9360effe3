"""The gateway worker's schedule against real PostgreSQL: it knows when the earliest scheduled
payment work falls due, and work leased by a gateway call in flight is due only when the
lease runs out (otherwise the worker would wake over and over for a call already running)."""

from __future__ import annotations

from sqlalchemy import text

from pagos.adapters.payment_repository import seconds_to_next_due
from saga_harness import db
from saga_harness.clients import Saga


async def test_the_worker_knows_when_the_next_payment_work_falls_due(saga: Saga) -> None:
    placed = await saga.settled_order(stock=5, status="COMPLETADA")
    async with db.probe() as conn:
        # Only this payment has work, within this probe that is rolled back.
        await conn.execute(text("UPDATE pagos.payments SET next_attempt_at = NULL "
                                "WHERE saga_id <> :s AND next_attempt_at IS NOT NULL"),
                           {"s": placed["saga_id"]})

        async def schedule(next_attempt: str, lease: str | None) -> float | None:
            lease_sql = f"now() + interval '{lease}'" if lease else "NULL"
            await conn.execute(text(
                "UPDATE pagos.payments SET status = 'CHARGING', "
                f"next_attempt_at = now() + interval '{next_attempt}', "
                f"lease_until = {lease_sql} WHERE saga_id = :s"), {"s": placed["saga_id"]})
            return await seconds_to_next_due(conn)

        seconds = await schedule("2 seconds", None)
        assert seconds is not None and 1.5 < seconds <= 2.0
        assert await schedule("-1 second", None) == 0.0, "overdue work is due now"
        seconds = await schedule("-1 second", "10 seconds")
        assert seconds is not None and 9.5 < seconds <= 10.0, "due when the lease runs out"
        await conn.execute(text("UPDATE pagos.payments SET next_attempt_at = NULL "
                                "WHERE saga_id = :s"), {"s": placed["saga_id"]})
        assert await seconds_to_next_due(conn) is None

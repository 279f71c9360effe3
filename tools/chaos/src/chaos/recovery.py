"""How long sagas waited for their next step around a fault: the time to recover, measured on
what the sagas left in the databases.

A saga's steps are the rows its steps committed: the order itself, every outbox row of any of
the three services (each step ends by committing the event that starts the next one) and
pedidos' audit trail. Between two consecutive steps the saga waited; a fault that stalls it
shows as a long wait.

- ``during_s``: the longest wait for a saga's next step counted from the fault's start (or
  from the saga's last step, if later), for waits that began before the fault ended. With two
  instances of every service, the survivors must keep sagas moving while the fault lasts: this
  is the time from the fault to the next step of the saga that waited longest.
- ``after_s``: the longest time from the fault's end to the next step of a saga that was
  waiting when it ended. With one instance, nothing can move while it is hung or cut off; the
  sagas must resume within the bound once it is back.

The bound is the one the saga promises for a hung or cut-off holder of a lease or a lead:
15 s from the fault to the next step completing, the consumer group's rebalance included
(docs/operations.md, "Rehearsing failures").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise

import asyncpg

from chaos.checker import Violation
from saga_harness import config

BOUND_S = 15.0


@dataclass(frozen=True)
class Window:
    """A fault as it happened: what it struck (resolved) and when (the database's clock and
    this host's are the same clock: the stack runs on this host)."""

    fault: str
    target: str
    started: datetime
    ended: datetime


@dataclass(frozen=True)
class Recovery:
    window: Window
    during_s: float
    """Longest wait for a next step from the fault's start, of waits that began before it
    ended."""
    during_saga: str | None
    after_s: float
    """Longest wait for a next step from the fault's end, of waits under way then."""
    after_saga: str | None
    sagas: int
    """Sagas that were under way at some moment of the fault."""

    def render(self) -> str:
        return (f"{self.window.fault} (struck {self.window.target}): the longest wait for a "
                f"saga's next step was {self.during_s:.1f}s from the fault's start, "
                f"{self.after_s:.1f}s from its end ({self.sagas} sagas under way)")


def measure(window: Window, steps: Mapping[str, Sequence[datetime]]) -> Recovery:
    """The waits around ``window`` of every saga, given the times of its steps."""
    during, during_saga, after, after_saga, under_way = 0.0, None, 0.0, None, 0
    for saga, times in steps.items():
        ordered = sorted(times)
        waits = [(a, b) for a, b in pairwise(ordered)
                 if b > window.started and a < window.ended]
        if not waits:
            continue
        under_way += 1
        for a, b in waits:
            waited = (b - max(a, window.started)).total_seconds()
            if waited > during:
                during, during_saga = waited, saga
            if a < window.ended < b and (b - window.ended).total_seconds() > after:
                after, after_saga = (b - window.ended).total_seconds(), saga
    return Recovery(window, during, during_saga, after, after_saga, under_way)


_STEPS = """
WITH run AS (
    SELECT saga_id, created_at FROM pedidos.orders o
    WHERE order_id = ANY($1::uuid[]) OR EXISTS (
        SELECT 1 FROM jsonb_array_elements(o.items) i WHERE i->>'sku' = ANY($2::text[])))
SELECT saga_id::text AS saga, created_at AS at FROM run
UNION ALL SELECT saga_id::text, at FROM pedidos.saga_audit
    WHERE saga_id IN (SELECT saga_id FROM run)
UNION ALL SELECT saga_id, created_at FROM pedidos.outbox
    WHERE saga_id IN (SELECT saga_id::text FROM run)
UNION ALL SELECT saga_id, created_at FROM inventario.outbox
    WHERE saga_id IN (SELECT saga_id::text FROM run)
UNION ALL SELECT saga_id, created_at FROM pagos.outbox
    WHERE saga_id IN (SELECT saga_id::text FROM run)
"""


async def steps_of(order_ids: Iterable[str], skus: Iterable[str]) -> dict[str, list[datetime]]:
    """The times of every step of the run's sagas (its acknowledged orders, and any order for
    its products), by saga id."""
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        rows = await conn.fetch(_STEPS, list(order_ids), list(skus))
    finally:
        await conn.close()
    steps: dict[str, list[datetime]] = defaultdict(list)
    for row in rows:
        steps[row["saga"]].append(row["at"])
    return steps


def time_to_recover(r: Recovery, survivors: bool) -> float:
    """The time to recover from ``r``'s fault: from its start with survivors to take over,
    from its end without."""
    return r.during_s if survivors else r.after_s


def beyond_bound(r: Recovery, survivors: bool) -> Violation | None:
    took = time_to_recover(r, survivors)
    if took <= BOUND_S:
        return None
    saga = r.during_saga if survivors else r.after_saga
    when = "while it lasted" if survivors else "after it ended"
    return Violation("recovery", f"{r.window.fault}: a saga waited {took:.1f}s for its next "
                     f"step {when} (bound {BOUND_S:g}s)", (saga,) if saga else ())

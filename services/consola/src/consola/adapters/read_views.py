"""The services' published read views (``<service>_read.*_v1``, their columns in each
service's ``read-contract.json``), read as ``console_reader``: a role that may read those
views and nothing else, so the console never sees a base table, a payload or a header.

One small pool for the console's process (``CONSOLA_DATABASE_URL``), opened lazily: the console
starts, and signs operators in, while the database is away; a page that needs it then says so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import asyncpg

from consola.usecases.ports import ServiceUnavailable
from sagakit.store import postgres_target

SERVICES = ("pedidos", "inventario", "pagos")
WHAT = "the read views"
LIST_LIMIT = 500
"""Most rows a list page shows (the oldest first): what needs a person, not an archive."""


def _rows(records: Sequence[asyncpg.Record]) -> list[dict[str, Any]]:
    return [dict(r) for r in records]


class ReadViews:
    """The overview's, the saga search's, the payments' and the dead letters' reads over the
    views."""

    def __init__(self, database_url: str, pool_size: int, timeout_s: float) -> None:
        self._target = postgres_target(database_url)
        self._pool_size = pool_size
        self._timeout_s = timeout_s
        self._pool: asyncpg.Pool | None = None
        self._opening = asyncio.Lock()

    async def _opened(self) -> asyncpg.Pool:
        async with self._opening:  # one pool, however many pages ask at once
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self._target.dsn(), min_size=0, max_size=self._pool_size,
                    command_timeout=self._timeout_s, timeout=self._timeout_s,
                    init=_decode_json, **self._target.connect_args(
                        {"application_name": "consola"}))
            return self._pool

    async def _fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        try:
            pool = await self._opened()
            async with pool.acquire(timeout=self._timeout_s) as conn:
                return _rows(await conn.fetch(query, *args))
        except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
            # The class only: a connection error's text may carry the URL's user and host.
            raise ServiceUnavailable(WHAT, f"no answer ({type(exc).__name__})") from None

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()

    async def sagas_per_state(self, window_s: int) -> list[dict[str, Any]]:
        return await self._fetch(
            "SELECT status, count(*) AS sagas FROM pedidos_read.sagas_v1 "
            "WHERE started_at > now() - make_interval(secs => $1) "
            "GROUP BY status ORDER BY status", float(window_s))

    async def dead_letters_per_state(self) -> list[dict[str, Any]]:
        return await self._fetch(" UNION ALL ".join(
            f"SELECT '{s}'::text AS service, state, count(*) AS letters "
            f"FROM {s}_read.dead_letters_v1 GROUP BY state" for s in SERVICES)
            + " ORDER BY service, state")

    async def outbox_backlog(self) -> list[dict[str, Any]]:
        return await self._fetch(" UNION ALL ".join(
            f"SELECT '{s}'::text AS service, COALESCE(sum(unpublished), 0)::bigint AS "
            f"unpublished, COALESCE(sum(failed), 0)::bigint AS failed, "
            f"max(oldest_age_s) AS oldest_age_s FROM {s}_read.outbox_backlog_v1"
            for s in SERVICES))

    async def payments_needing_action_count(self) -> int:
        [row] = await self._fetch(
            "SELECT count(*) AS n FROM pagos_read.payments_needing_action_v1")
        return int(row["n"])

    async def payments_needing_action(self) -> list[dict[str, Any]]:
        return await self._fetch(
            "SELECT payment_id::text, saga_id, order_id::text, customer_id, status, amount, "
            "currency, charge_id, refund_id, amount_refunded, charge_attempts, "
            "refund_attempts, marked_at FROM pagos_read.payments_needing_action_v1 "
            "ORDER BY marked_at NULLS FIRST, payment_id LIMIT $1", LIST_LIMIT)

    async def search_sagas(self, *, saga_id: str | None, order_id: str | None,
                           customer_id: str | None, state: str | None,
                           older_than_s: int | None, stuck: bool, active: list[str],
                           limit: int) -> list[dict[str, Any]]:
        # Stuck: not terminal, and past its step's deadline or its own expiry.
        return await self._fetch(
            "SELECT saga_id::text, order_id::text, customer_id, status, current_step, "
            "total_amount, currency, started_at, updated_at, step_deadline_at, expires_at, "
            "extract(epoch FROM now() - started_at)::float8 AS age_s, "
            "(status = ANY($6::text[]) AND (step_deadline_at < now() OR expires_at < now())) "
            "IS TRUE AS stuck FROM pedidos_read.sagas_v1 "
            "WHERE ($1::uuid IS NULL OR saga_id = $1::uuid) "
            "AND ($2::uuid IS NULL OR order_id = $2::uuid) "
            "AND ($3::text IS NULL OR customer_id = $3) AND ($4::text IS NULL OR status = $4) "
            "AND ($5::float8 IS NULL OR started_at < now() - make_interval(secs => $5)) "
            "AND (NOT $7 OR (status = ANY($6::text[]) AND (step_deadline_at < now() "
            "OR expires_at < now()))) "
            "ORDER BY started_at DESC LIMIT $8",
            saga_id, order_id, customer_id, state,
            None if older_than_s is None else float(older_than_s), active, stuck, limit)

    async def open_dead_letters(self) -> list[dict[str, Any]]:
        return await self._fetch(" UNION ALL ".join(
            f"(SELECT id::text, service, at, saga_id, event_type, reason, error_class, "
            f"attempts, original_topic, original_partition, original_offset "
            f"FROM {s}_read.dead_letters_v1 WHERE state = 'open' ORDER BY at LIMIT $1)"
            for s in SERVICES) + " ORDER BY service, event_type, error_class, at", LIST_LIMIT)


async def _decode_json(conn: asyncpg.Connection) -> None:
    for kind in ("json", "jsonb"):
        await conn.set_type_codec(kind, encoder=json.dumps, decoder=json.loads,
                                  schema="pg_catalog")

"""Statements sent on asyncpg's connection itself, for the few that every saga step sends.

SQLAlchemy's asyncio execution layer (a greenlet switch, the DB-API cursor adapter, the result
object) costs a handler more CPU than asyncpg's whole round trip: a short read took 0.20 ms of
the client's CPU through it, 0.07 sent on the driver (ADR 0003). For a statement
run on every message that is worth skipping; everything else keeps SQLAlchemy. The statement
is still written with SQLAlchemy Core and compiled by SQLAlchemy's asyncpg dialect, once; its
values are passed as asyncpg takes them (``uuid.UUID``, ``Decimal``, ``datetime``, ``str``),
and rows come back as asyncpg records (``row["column"]``; JSON columns decoded by the codecs
SQLAlchemy set on the connection).

A statement goes to the driver only where that cannot change what it means: inside the
transaction SQLAlchemy has begun, or on a connection in autocommit. Otherwise it is the
statement that must begin the transaction (a ``FOR UPDATE`` whose lock must last), and it goes
through SQLAlchemy, which sends the BEGIN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import asyncpg
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import ClauseElement, Executable

from sagakit.errors import CONNECTION_LOST

_DIALECT = asyncpg_dialect()


@dataclass(frozen=True)
class Compiled:
    sql: str
    """With asyncpg's ``$n`` placeholders."""
    names: tuple[str, ...]
    """The values' names, in placeholder order."""
    fixed: Mapping[str, Any]
    """Values the statement carries itself (``literal()``, ``bindparam(value=...)``)."""

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        return [params[n] if n in params else self.fixed[n] for n in self.names]


@cache
def compiled(statement: ClauseElement,
             schemas: tuple[tuple[str | None, str], ...] = ()) -> Compiled:
    """``statement`` as asyncpg takes it, its schemas renamed as ``schemas`` says (SQLAlchemy's
    ``schema_translate_map``, as pairs). Statements are kept by identity: compile module-level
    or cached statements, not new ones per call."""
    c: Any = statement.compile(dialect=_DIALECT, schema_translate_map=dict(schemas) or None,
                               render_schema_translate=bool(schemas))
    if "POSTCOMPILE" in c.string:
        raise ValueError("a statement with expanding values (IN lists) cannot be compiled "
                         "once; bind an array instead (= ANY)")
    if any(b.callable is not None for b in c.binds.values()):
        raise ValueError("values computed at execution time are SQLAlchemy's to compute")
    return Compiled(c.string, tuple(c.positiontup or ()),
                    {name: b.value for name, b in c.binds.items() if not b.required})


Row = Mapping[Any, Any]
"""A row by column name: an asyncpg record, or SQLAlchemy's mapping of a row."""


def _options(conn: AsyncConnection) -> Mapping[str, Any]:
    return conn.sync_connection.get_execution_options() if conn.sync_connection else {}


async def driver_of(conn: AsyncConnection) -> asyncpg.Connection:
    """The asyncpg connection under a pooled SQLAlchemy connection."""
    sync = conn.sync_connection
    if sync is not None and not sync.closed and not sync.invalidated:
        # The connection already holds its pooled connection: reading it does no I/O, so it
        # needs no greenlet. ``get_raw_connection`` spawns one on every call: 10 % of
        # inventario's running samples at 120 sagas/s.
        fairy = sync.connection
    else:
        # Not connected yet, or invalidated: getting it may connect, through SQLAlchemy.
        fairy = await conn.get_raw_connection()
    driver = fairy.driver_connection
    assert driver is not None
    return driver


async def fetch(conn: AsyncConnection, statement: Executable,
                params: Mapping[str, Any]) -> Sequence[Row]:
    """The rows of ``statement``."""
    options = _options(conn)
    if not (conn.in_transaction() or options.get("isolation_level") == "AUTOCOMMIT"):
        return (await conn.execute(statement, dict(params))).mappings().all()
    # The schemas the connection renames (a copy of a service's tables, in tests) are renamed
    # here too, as SQLAlchemy would have.
    c = compiled(statement, tuple(sorted((options.get("schema_translate_map") or {}).items(),
                                         key=str)))
    driver = await driver_of(conn)
    try:
        rows: Sequence[Row] = await driver.fetch(c.sql, *c.args(params))
        return rows
    except CONNECTION_LOST:
        # SQLAlchemy did not see it fail: keep the dead connection out of the pool.
        await conn.invalidate()
        raise

"""Units of work of several messages in one transaction, one COMMIT for all of them (ADR 0006)."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sagakit.errors import CommitOutcomeUnknown, is_connection_failure
from sagakit.store.driver import driver_of
from sagakit.store.outbox_signal import OutboxSignal
from sagakit.store.tables import MessagingTables
from sagakit.store.unit_of_work import UnitOfWork


class SharedTransaction:
    """Units of work of several messages in one transaction: one COMMIT for all of them.

        async with shared:                     # a connection, BEGIN
            async with shared.unit() as uow:   # a unit of work whose commit statement runs
                ...                            # in the shared transaction
            await shared.commit()              # COMMIT; then every unit's after_commit

    For the consumer, when a partition's records queue up faster than they are handled: a
    commit costs PostgreSQL more than the statement it ends (a WAL flush, and a wake-up of
    every connection listening for the notifications it sends), and one COMMIT for many
    records divides that cost (ADR 0006).

    Only units that read outside a transaction and write everything with their commit
    statement may share one (``UnitOfWork`` refuses others): each unit's writes are then that
    one statement, whole or nothing, and a unit whose guard found nothing wrote nothing and
    leaves the transaction usable. A unit that fails (a duplicate's claim included) leaves it
    aborted: nothing of any unit is written, and the caller handles the messages again one by
    one. A unit's ``committed`` means written in the shared transaction; what it asked to run
    after its commit runs after the shared COMMIT, and never if the transaction rolls back.

    Locks taken by one unit are held until the shared COMMIT, so two shared transactions can
    wait for each other: a lock wait longer than ``lock_timeout_ms`` fails the transaction
    (SQLSTATE 55P03) rather than leaving a deadlock to PostgreSQL's detector (a second).
    """

    def __init__(self, engine: AsyncEngine, tables: MessagingTables, service: str,
                 lock_timeout_ms: int, signal: OutboxSignal | None = None) -> None:
        self._engine = engine
        self._signal = signal
        self.tables = tables
        self.service = service
        self._lock_timeout_ms = int(lock_timeout_ms)
        self._conn: AsyncConnection | None = None
        self._driver: asyncpg.Connection | None = None
        self._callbacks: list[Callable[[], None]] = []
        self.committed = False

    @property
    def connection(self) -> AsyncConnection:
        if self._conn is None:
            raise RuntimeError("shared transaction used outside 'async with'")
        return self._conn

    async def __aenter__(self) -> SharedTransaction:
        conn = await self._engine.connect()
        try:
            # SQLAlchemy in autocommit sends no BEGIN or COMMIT of its own, and the units' reads
            # go to the driver (sagakit.store.driver): the transaction is the driver's, begun
            # here.
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            driver = await driver_of(conn)
            await driver.execute(
                f"BEGIN; SET LOCAL lock_timeout = '{self._lock_timeout_ms}ms'")
        except BaseException:
            await conn.invalidate()
            await conn.close()
            raise
        self._conn, self._driver = conn, driver
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        conn, driver = self._conn, self._driver
        assert conn is not None and driver is not None
        self._conn = self._driver = None
        try:
            if not self.committed:
                try:
                    await driver.execute("ROLLBACK")
                except BaseException:
                    # Whatever state the connection is in, it must not go back to the pool.
                    await conn.invalidate()
        finally:
            await conn.close()

    def unit(self) -> UnitOfWork:
        return UnitOfWork(self._engine, self.tables, self.service,
                          reads_outside_transaction=True, within=self, signal=self._signal)

    def after_commit(self, *callbacks: Callable[[], None]) -> None:
        self._callbacks.extend(callbacks)

    async def commit(self) -> None:
        if self._driver is None or self.committed:
            raise RuntimeError("shared transaction not open")
        try:
            await self._driver.execute("COMMIT")
        except BaseException as exc:
            if is_connection_failure(exc):
                raise CommitOutcomeUnknown(f"connection lost during COMMIT: {exc!r}") from exc
            raise
        self.committed = True
        for callback in self._callbacks:
            callback()


"""Consecutive records of a partition handled in one shared transaction (ADR 0006).

When a partition's records queue up (the stack is busy), consecutive records whose handlers
allow it (``Subscription.shares_transaction``) are handled in one transaction, each with its
own unit of work, inbox row and outbox rows, and one COMMIT for all (``SharedTransaction``): a
commit costs PostgreSQL more than the statement it ends. Each record keeps its guarantees: a
record that fails in a shared transaction rolls all of it back, and the records up to it are
handled alone, so that its failure is judged, retried or dead-lettered by itself; offsets are
committed only after the shared COMMIT. A record never waits for others to arrive.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from sagakit.consumer.handling import Handling
from sagakit.consumer.records import Admitted, RawRecord, Verdict
from sagakit.consumer.reporting import Report
from sagakit.observability import metrics
from sagakit.settings import MessagingSettings
from sagakit.store.shared_transaction import SharedTransaction
from sagakit.store.unit_of_work import AlreadyProcessed

log = logging.getLogger("sagakit.consumer")


class SharedRuns:
    def __init__(self, service: str, settings: MessagingSettings, handling: Handling,
                 report: Report,
                 shared_transaction: Callable[[], SharedTransaction] | None) -> None:
        self.service = service
        self.settings = settings
        self.handling = handling
        self.report = report
        self.shared_transaction = shared_transaction
        # Sagas touched by an open shared transaction (resolved when it ends), and those of
        # them another lane waits for (``together``).
        self._held: dict[str, asyncio.Future[None]] = {}
        self._wanted: set[str] = set()

    @property
    def enabled(self) -> bool:
        return self.shared_transaction is not None and self.settings.consumer_batch_max > 1

    @property
    def idle(self) -> bool:
        """No shared transaction holds a saga, and no lane waits for one."""
        return not self._held and not self._wanted

    async def together(self, run: list[tuple[RawRecord, Admitted]]) -> tuple[int, int]:
        """Handles ``run`` in one shared transaction; returns how many records of it, from the
        first, it committed, and how many after those must be handled alone.

        Lanes of this process coordinate by saga (the key of every lock a saga step takes):
        a shared transaction records the sagas it has touched until it ends. A record whose saga
        another lane's open shared transaction holds is not handled in this one: this one
        commits what it has (releasing its own locks), and the next one begins by waiting for
        the other to end; meanwhile the other is asked to commit after its current record.
        Two lanes never wait for each other's locks, and no lane waits for the lock timeout.
        (Across processes, the lock timeout still stands.)"""
        assert self.shared_transaction is not None
        started = time.perf_counter()
        handled = 0
        mine: set[str] = set()
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(self.settings.handler_timeout_s):
                async with self.shared_transaction() as shared:
                    stale = False
                    for _, admitted in run:
                        saga = admitted.envelope.saga_id
                        if saga not in mine:
                            if saga in self._held:
                                if handled:
                                    self._wanted.add(saga)
                                    break  # commit now; the next transaction waits for it
                                await self._wait_until_released(saga)
                            self._held[saga] = ended
                            mine.add(saga)
                        if not await self.handling.shared(shared, admitted):
                            stale = True  # its guard found its state moved: it goes alone
                            break
                        handled += 1
                        if self._wanted & mine:
                            break  # another lane waits for a saga of this one
                    if handled == 0:
                        return 0, 1
                    await shared.commit()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            metrics.SHARED_TRANSACTIONS.labels(self.service, "rolled_back").inc()
            log.info("shared transaction of %s records rolled back (%s), handling them alone",
                     len(run), type(exc).__name__, extra={"service": self.service})
            if isinstance(exc, AlreadyProcessed):
                # Redelivered records (after a crash, a rebalance) come in runs: the ones after
                # a duplicate are most likely duplicates too, each of which would roll back
                # another shared transaction.
                return 0, len(run)
            # Which record failed, if it was one of them and not the COMMIT: those before it
            # worked and the ones after it may well work together again.
            return 0, min(handled + 1, len(run))
        finally:
            for saga in mine:
                if self._held.get(saga) is ended:
                    del self._held[saga]
                self._wanted.discard(saga)
            ended.set_result(None)
        metrics.SHARED_TRANSACTIONS.labels(self.service, "committed").inc()
        metrics.SHARED_TRANSACTION_RECORDS.labels(self.service).observe(handled)
        elapsed = time.perf_counter() - started
        for _, admitted in run[:handled]:
            self.report.handled(admitted.envelope, "processed", elapsed, 1)
        return handled, 1 if stale else 0

    def ask_for(self, verdict: Verdict) -> None:
        """A record about to be handled alone: if another lane's shared transaction holds its
        saga, that one commits after its current record instead of making it wait longer."""
        if isinstance(verdict, Admitted) and verdict.envelope.saga_id in self._held:
            self._wanted.add(verdict.envelope.saga_id)

    async def _wait_until_released(self, saga: str) -> None:
        """Until no other lane's shared transaction holds ``saga``, asking it to commit."""
        while (holder := self._held.get(saga)) is not None:
            self._wanted.add(saga)
            await asyncio.shield(holder)

"""One record handled alone until it is decided: handled, a duplicate, skipped, dead-lettered,
or waiting for its retry.

``TransientError`` (and database serialisation failures, deadlocks, lock timeouts) are retried
with exponential backoff and jitter: the record's ``retry`` outcome says how long to wait, and
the partition waits for it (``sagakit.consumer.partitions``). When the attempts run out, and at
once for a ``PermanentError`` or any other exception, the record is dead-lettered with every
attempt's time and error. An unreachable database is nobody's fault but the infrastructure's:
the record is tried again after a capped backoff for as long as it takes (``until_decided``).
"""

from __future__ import annotations

import asyncio
import logging
import time

from sagakit.consumer.admission import Admission
from sagakit.consumer.dead_lettering import DeadLetterWriter
from sagakit.consumer.handling import Handling
from sagakit.consumer.records import Outcome, RawRecord, Rejected, Verdict
from sagakit.consumer.reporting import Report
from sagakit.consumer.retry_policy import (
    INFRASTRUCTURE_BACKOFF,
    AtOnce,
    GiveUp,
    InfrastructureDown,
    RetryPolicy,
)
from sagakit.context import current_message
from sagakit.dead_letters import Attempt
from sagakit.envelope import utc_now_iso
from sagakit.observability import metrics

log = logging.getLogger("sagakit.consumer")


class Processor:
    def __init__(self, service: str, admission: Admission, handling: Handling,
                 policy: RetryPolicy, dead_letters: DeadLetterWriter, report: Report) -> None:
        self.service = service
        self.admission = admission
        self.handling = handling
        self.policy = policy
        self.dead_letters = dead_letters
        self.report = report

    async def admit(self, raw: RawRecord) -> Verdict:
        return await self.admission.admit(raw)

    def skipped(self, outcome: Outcome) -> Outcome:
        return self.report.skipped(outcome)

    async def process(self, raw: RawRecord, prior_attempts: list[Attempt] | None = None,
                      verdict: Verdict | None = None) -> Outcome:
        """Handles one record once, alone. A transient failure with attempts left returns a
        ``retry`` outcome with the backoff to wait; the caller redelivers the record with the
        attempts so far (``prior_attempts``). ``verdict``: the record's ``admit``, if known.
        Raises ``InfrastructureDown`` while the database is unreachable."""
        started = time.perf_counter()
        verdict = verdict or await self.admission.admit(raw)
        if isinstance(verdict, Outcome):
            return self.report.skipped(verdict)
        if isinstance(verdict, Rejected):
            return await self.dead_letters.write(raw, verdict.envelope, verdict.reason,
                                                 verdict.error,
                                                 [Attempt(1, utc_now_iso(), verdict.detail)])
        envelope = verdict.envelope
        event_type = envelope.event_type

        token = current_message.set(envelope)
        attempts: list[Attempt] = list(prior_attempts or [])
        conflicts = 0
        try:
            while True:
                number = len(attempts) + 1
                try:
                    status = await self.handling.alone(verdict)
                    self.report.handled(envelope, status, time.perf_counter() - started, number)
                    return Outcome(status, attempts, event_type)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    decision = self.policy.after_failure(exc, number, conflicts)
                    if isinstance(decision, AtOnce):
                        conflicts += 1
                        await asyncio.sleep(decision.pause_s)
                        continue
                    attempts.append(Attempt(number, utc_now_iso(), repr(exc)[:2000]))
                    metrics.STEP_ERRORS.labels(
                        self.service, metrics.event_type_label(event_type), decision.kind).inc()
                    if isinstance(decision, GiveUp):
                        return await self.dead_letters.write(raw, envelope, decision.reason,
                                                             exc, attempts)
                    log.warning("transient failure, retrying in %.2fs: %r", decision.delay_s,
                                exc,
                                extra={"service": self.service, "saga_id": envelope.saga_id,
                                       "event_type": event_type, "status": "FAILED",
                                       "attempt": number,
                                       "schema_version": envelope.schema_version,
                                       "span_id": envelope.span_id,
                                       "parent_span_id": envelope.parent_span_id})
                    return Outcome("retry", attempts, event_type, decision.delay_s)
        finally:
            current_message.reset(token)

    async def until_decided(self, raw: RawRecord, verdict: Verdict | None = None,
                            prior_attempts: list[Attempt] | None = None) -> Outcome:
        """``process``, waiting out an unreachable database (never a reason to dead-letter)."""
        failures = 0
        while True:
            try:
                return await self.process(raw, prior_attempts, verdict)
            except InfrastructureDown as exc:
                # Attempts made before the outage do not count against the record after it.
                prior_attempts = None
                failures += 1
                delay = INFRASTRUCTURE_BACKOFF.delay(failures)
                log.warning("database unreachable, retrying record in %.2fs: %r",
                            delay, exc.__cause__ or exc,
                            extra={"service": self.service, "attempt": failures})
                await asyncio.sleep(delay)

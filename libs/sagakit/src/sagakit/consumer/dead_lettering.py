"""How the consumer gives up on a record: its dead letter (``sagakit.dead_letters``) goes through
the outbox to the service's dead-letter topic, with an inbox row marking the message
dead-lettered, in one unit of work.

What PostgreSQL cannot keep as text (a NUL byte) is parked as bytes; a letter refused even then
is refused for the database's own reasons (a table, a permission) and is waited out like a
database that is away: no record can hold its partition up for want of a letter.
"""

from __future__ import annotations

import logging
import traceback
from typing import Protocol

from saga_contracts import headers as h
from saga_contracts.topics import dead_letter_topic
from sagakit import dead_letters
from sagakit.consumer.records import Outcome, RawRecord
from sagakit.consumer.retry_policy import InfrastructureDown, classify
from sagakit.dead_letters import Attempt, Original
from sagakit.envelope import Envelope, decode_headers
from sagakit.observability import metrics
from sagakit.store.tables import INBOX_DEAD_LETTERED
from sagakit.store.unit_of_work import AlreadyProcessed, UnitOfWorkFactory

log = logging.getLogger("sagakit.consumer")


class DeadLetterWriter(Protocol):
    async def write(self, raw: RawRecord, envelope: Envelope | None, reason: str,
                    exc: BaseException, attempts: list[Attempt]) -> Outcome:
        """Parks ``raw`` for an operator: 'dead_lettered', or 'duplicate' if the message was
        dead-lettered or processed before; ``InfrastructureDown`` while it cannot be written."""
        ...


def _identity(raw: RawRecord, envelope: Envelope | None) -> tuple[str, str, str | None]:
    """The message id, event type and saga id a dead letter of ``raw`` is recorded under (its
    inbox row): the envelope's, else its headers', else where the record sits. Only text that
    PostgreSQL keeps: a header with a NUL in it names nothing."""
    if envelope is not None:
        return (envelope.message_id, dead_letters.scrubbed(envelope.event_type),
                envelope.saga_id)
    hdrs = {k: v for k, v in decode_headers(raw.headers).items() if dead_letters.storable(v)}
    return (hdrs.get(h.MESSAGE_ID) or f"kafka:{raw.topic}:{raw.partition}:{raw.offset}",
            hdrs.get(h.EVENT_TYPE) or "undecodable", hdrs.get(h.SAGA_ID) or None)


class DeadLetters:
    """Writes dead letters through the outbox of ``service``."""

    def __init__(self, service: str, uow_factory: UnitOfWorkFactory) -> None:
        self.service = service
        self.uow_factory = uow_factory
        self.topic = dead_letter_topic(service)

    async def write(self, raw: RawRecord, envelope: Envelope | None, reason: str,
                    exc: BaseException, attempts: list[Attempt]) -> Outcome:
        message_id, event_type, saga_id = _identity(raw, envelope)
        original = Original(raw.topic, raw.value, message_id, event_type, raw.key, raw.headers,
                            raw.partition, raw.offset, raw.timestamp)
        trace = "".join(traceback.format_exception(exc))
        for as_bytes in (False, True):
            letter = dead_letters.build(service=self.service, reason=reason,
                                        error_class=type(exc).__name__, attempts=attempts,
                                        last_traceback=trace, original=original,
                                        saga_id=saga_id, as_bytes=as_bytes)
            try:
                async with self.uow_factory() as uow:
                    uow.claim(message_id, event_type, saga_id, status=INBOX_DEAD_LETTERED)
                    letter.emit(uow)
                    await uow.commit()
                break
            except AlreadyProcessed:
                return Outcome("duplicate", attempts)
            except Exception as db_exc:
                if classify(db_exc) in ("infrastructure", "transient"):
                    raise InfrastructureDown(str(db_exc)) from db_exc
                if as_bytes:
                    # Of the record, the letter now holds bytes in base64 and nothing else: the
                    # database refuses it for what it is (a table, a permission), not for this
                    # record, and would refuse any other. Waited out like a database that is
                    # away, the lane goes on once that is fixed; raised, it would restart the
                    # consumer onto the same record, for ever.
                    raise InfrastructureDown(f"no dead letter can be written: {db_exc!r}"
                                             ) from db_exc
                # Something of the record the database would not take as text: parked as
                # bytes instead, so that no record can hold its partition up.
                log.warning("dead letter refused, parking the record as bytes: %r", db_exc,
                            extra={"service": self.service, "event_type": event_type,
                                   "message_id": message_id})
        metrics.MESSAGES_CONSUMED.labels(self.service, metrics.event_type_label(event_type),
                                         "dead_lettered").inc()
        log.error("message dead-lettered (%s): %s", reason, exc,
                  extra={"service": self.service, "saga_id": saga_id, "event_type": event_type,
                         "status": "FAILED", "attempt": len(attempts),
                         "message_id": message_id, "dlq_topic": self.topic,
                         "schema_version": envelope.schema_version if envelope else None,
                         "span_id": envelope.span_id if envelope else None,
                         "parent_span_id": envelope.parent_span_id if envelope else None})
        return Outcome("dead_lettered", attempts)

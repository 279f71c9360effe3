"""What the consumer says about each record it handled or skipped: the handler's duration and
the outcome in Prometheus, one log line per record handled (docs/standard.md#structured-logs, #metrics)."""

from __future__ import annotations

import logging

from sagakit.consumer.records import Outcome
from sagakit.envelope import Envelope
from sagakit.observability import metrics
from sagakit.schema_versions.use import SCHEMA_USE

log = logging.getLogger("sagakit.consumer")


class Report:
    def __init__(self, service: str) -> None:
        self.service = service

    def handled(self, envelope: Envelope, status: str, elapsed: float, attempt: int) -> None:
        event_type = envelope.event_type
        label = metrics.event_type_label(event_type)
        metrics.HANDLER_DURATION.labels(self.service, label).observe(elapsed)
        metrics.MESSAGES_CONSUMED.labels(self.service, label, status).inc()
        SCHEMA_USE.consumed(self.service, event_type, envelope.schema_version)
        log.info("event %s", "duplicate ignored" if status == "duplicate" else "processed",
                 extra={"service": self.service, "saga_id": envelope.saga_id,
                        "event_type": event_type, "status": "SUCCESS",
                        "duration_ms": round(elapsed * 1000, 2), "attempt": attempt,
                        "message_id": envelope.message_id,
                        "schema_version": envelope.schema_version,
                        "span_id": envelope.span_id,
                        "parent_span_id": envelope.parent_span_id,
                        "duplicate": status == "duplicate"})

    def skipped(self, outcome: Outcome) -> Outcome:
        if outcome.event_type is not None:
            metrics.MESSAGES_CONSUMED.labels(
                self.service, metrics.event_type_label(outcome.event_type), "skipped").inc()
        return outcome

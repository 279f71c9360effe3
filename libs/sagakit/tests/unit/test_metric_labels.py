"""The ``event_type`` label holds only the event types the contracts define: a record's
``X-Event-Type`` header is whatever its producer wrote, and each value taken as it came would be
a new series in Prometheus, without bound. Anything else is counted under ``other``."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace
from typing import Any

from prometheus_client import REGISTRY

from sagakit.consumer import EventConsumer, RawRecord
from sagakit.consumer.reporting import Report
from sagakit.envelope import Envelope
from sagakit.observability import metrics
from sagakit.settings import MessagingSettings


def _event_type_values(metric: str, service: str) -> set[str]:
    return {s.labels["event_type"] for m in REGISTRY.collect() for s in m.samples
            if s.name == metric and s.labels.get("service") == service}


class _UnitOfWork:
    async def __aenter__(self) -> _UnitOfWork:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def claim(self, *args: Any, **kwargs: Any) -> None:
        return None

    def emit_raw(self, **row: Any) -> None:
        return None

    async def commit(self) -> None:
        return None


async def test_records_of_made_up_event_types_add_no_series() -> None:
    service = f"labels-{uuid.uuid4().hex[:8]}"
    consumer = EventConsumer(service=service, topics=["order-events"], subscriptions=[],
                             uow_factory=lambda **_: _UnitOfWork(), settings=MessagingSettings())
    for n in range(50):
        made_up = f"Made-Up-{n}-{uuid.uuid4().hex}"
        envelope = Envelope.new(saga_id=str(uuid.uuid4()), event_type=made_up,
                                schema_version="1.0.0", source_service="pedidos", payload={})
        record = RawRecord("order-events", 0, n, None, json.dumps(envelope.to_dict()).encode(),
                           [("X-Event-Type", made_up.encode())])
        assert (await consumer.processor.process(record)).status == "dead_lettered"
    assert _event_type_values("saga_messages_consumed_total", service) == {"other"}


def test_handled_and_skipped_records_are_labelled_by_known_types_only() -> None:
    service = f"labels-{uuid.uuid4().hex[:8]}"
    report = Report(service)
    for event_type in ("OrdenSolicitada", "Nope-1", "Nope-2"):
        envelope = Envelope.new(saga_id=str(uuid.uuid4()), event_type=event_type,
                                schema_version="1.0.0", source_service="pedidos", payload={})
        report.handled(envelope, "processed", 0.001, 1)
    assert _event_type_values("saga_messages_consumed_total", service) == {
        "OrdenSolicitada", "other"}
    assert _event_type_values("saga_handler_duration_seconds_count", service) == {
        "OrdenSolicitada", "other"}


def test_the_label_of_an_event_type() -> None:
    assert metrics.event_type_label("PagoRechazado") == "PagoRechazado"
    assert metrics.event_type_label("pagorechazado") == "other"
    assert metrics.event_type_label(None) == "other"


class _Rows:
    """An engine whose one query answers ``rows`` (event type, dead-lettered rows)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int]] = []

    def connect(self) -> Any:
        rows = self

        class _Conn:
            async def __aenter__(self) -> _Conn:
                return self

            async def __aexit__(self, *exc: object) -> None:
                return None

            async def execute(self, _: object) -> Any:
                return SimpleNamespace(all=lambda: list(rows.rows))

        return _Conn()


async def test_the_dead_letter_gauge_sums_unknown_types_and_reads_zero_once_purged() -> None:
    from sagakit.store import inbox
    from sagakit.store.tables import messaging_tables, service_metadata

    service = f"labels-{uuid.uuid4().hex[:8]}"
    tables = messaging_tables(service_metadata("s"))
    engine = _Rows()
    engine.rows = [("OrdenSolicitada", 2), ("Made-Up-1", 3), ("Made-Up-2", 4)]
    await inbox.refresh_dead_letter_gauge(engine, tables, service)  # type: ignore[arg-type]

    def gauge(label: str) -> float | None:
        return REGISTRY.get_sample_value("dlq_messages_total",
                                         {"service": service, "event_type": label})

    assert (gauge("OrdenSolicitada"), gauge("other"), gauge("Made-Up-1")) == (2, 7, None)
    engine.rows = []  # every dead-lettered row purged past its retention
    await inbox.refresh_dead_letter_gauge(engine, tables, service)  # type: ignore[arg-type]
    assert (gauge("OrdenSolicitada"), gauge("other")) == (0, 0)

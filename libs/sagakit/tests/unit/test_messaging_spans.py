"""Kafka spans follow OpenTelemetry's messaging semantic conventions (``send {topic}``,
``process {topic}``, messaging.* attributes), and ``tracestate`` travels with ``traceparent``:
from the unit of work's context into the outbox row's headers, through the relay's ``send`` span
into the Kafka headers, and from the record's headers into the consumer's ``process`` span.
Spans are caught by an in-memory exporter."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from saga_contracts import headers as h
from saga_contracts.events.inventory import StockLiberado
from sagakit.consumer.handling import Handling
from sagakit.consumer.records import Admitted
from sagakit.envelope import Envelope
from sagakit.message import Message
from sagakit.observability import tracing
from sagakit.outbox.publisher import Publisher
from sagakit.outbox.statements import OutboxRow
from sagakit.settings import MessagingSettings
from sagakit.store.unit_of_work import UnitOfWork

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
STATE = "vendor=opaque-value,other=1"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_tracer", provider.get_tracer("test"))
    monkeypatch.setattr(tracing, "_enabled", True)
    yield exporter


def _upstream() -> trace.Span:
    """A span of a caller whose trace carries vendor state."""
    return NonRecordingSpan(SpanContext(TRACE_ID, 0x00F067AA0BA902B7, is_remote=True,
                                        trace_flags=TraceFlags(1),
                                        trace_state=TraceState.from_header([STATE])))


def _envelope() -> Envelope:
    return Envelope.new(saga_id="saga-1", event_type="PagoExitoso", schema_version="1.0.0",
                        source_service="pagos", payload={})


def test_an_emitted_event_keeps_the_traces_vendor_state_in_its_outbox_row(
        spans: InMemorySpanExporter) -> None:
    uow = UnitOfWork(None, None, "inventario")  # type: ignore[arg-type]
    with trace.use_span(_upstream()):
        carried = tracing.current_trace_headers()
        uow.emit(StockLiberado(order_id=str(uuid.uuid4()), items=()), saga_id="saga-1")
    assert carried["traceparent"].startswith(f"00-{TRACE_ID:032x}-")
    assert carried["tracestate"] == STATE
    (row,) = uow._outgoing
    assert row.traceparent == carried["traceparent"]
    assert row.headers[h.TRACEPARENT] == carried["traceparent"]
    assert row.headers[h.TRACESTATE] == STATE


class _Producer:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, topic: str, **kwargs: Any) -> asyncio.Future[Any]:
        self.sent.append({"topic": topic, **kwargs})
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


async def test_the_relay_sends_under_a_send_span_and_carries_tracestate(
        spans: InMemorySpanExporter) -> None:
    with trace.use_span(_upstream()):
        carried = tracing.current_trace_headers()
    row = OutboxRow("m-1", "order-events", "saga-1", {"x": 1},
                    {h.SAGA_ID: "saga-1", **carried}, datetime.now(UTC), 0,
                    carried["traceparent"], "OrdenSolicitada")
    publisher = Publisher(None, None, "pedidos", MessagingSettings(),  # type: ignore[arg-type]
                          lambda rows: None, may_send=lambda: True, epoch=lambda: 1)
    producer = _Producer()
    await publisher._send(producer, row)
    (span,) = spans.get_finished_spans()
    assert span.name == "send order-events" and span.kind == trace.SpanKind.PRODUCER
    assert span.context.trace_id == TRACE_ID
    attributes = dict(span.attributes or {})
    assert {k: attributes[k] for k in (
        "messaging.system", "messaging.operation.type", "messaging.destination.name",
        "messaging.kafka.message.key")} == {
        "messaging.system": "kafka", "messaging.operation.type": "send",
        "messaging.destination.name": "order-events", "messaging.kafka.message.key": "saga-1"}
    headers = {k: v.decode() for k, v in producer.sent[0]["headers"]}
    assert headers["traceparent"] == f"00-{TRACE_ID:032x}-{span.context.span_id:016x}-01"
    assert headers["tracestate"] == STATE


async def test_the_consumer_processes_under_a_process_span_with_the_records_tracestate(
        spans: InMemorySpanExporter) -> None:
    with trace.use_span(_upstream()):
        carried = tracing.current_trace_headers()
    envelope = _envelope()
    message = Message(envelope, None, False, ("payment-events", 4, 1234))
    admitted = Admitted(message, None, carried["traceparent"],  # type: ignore[arg-type]
                        carried["tracestate"])
    with Handling("inventario", None, MessagingSettings()).span(admitted):  # type: ignore[arg-type]
        inner = tracing.current_trace_headers()
    (span,) = spans.get_finished_spans()
    assert span.name == "process payment-events" and span.kind == trace.SpanKind.CONSUMER
    assert span.context.trace_id == TRACE_ID
    attributes = dict(span.attributes or {})
    assert {k: attributes[k] for k in (
        "messaging.system", "messaging.operation.type", "messaging.destination.name",
        "messaging.kafka.message.key", "messaging.kafka.offset",
        "messaging.destination.partition.id", "messaging.consumer.group.name")} == {
        "messaging.system": "kafka", "messaging.operation.type": "process",
        "messaging.destination.name": "payment-events",
        "messaging.kafka.message.key": envelope.saga_id, "messaging.kafka.offset": 1234,
        "messaging.destination.partition.id": "4", "messaging.consumer.group.name": "inventario"}
    # What the handler emits inside it goes on with the same vendor state.
    assert inner["tracestate"] == STATE

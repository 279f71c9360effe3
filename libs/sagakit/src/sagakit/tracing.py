"""OpenTelemetry: one trace per saga, carried across the broker.

The trace context travels like the saga's own ids: the unit of work stores the current
``traceparent`` with each outbox row, the relay publishes under a PRODUCER span that continues
it and puts its own context in the Kafka headers, and the consumer opens a CONSUMER span from
those headers, inside which the handler runs and emits. Work that starts later from stored
state (a payment retry, a deadline) continues from the traceparent stored with that state.

Nothing is exported unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` (OTLP over HTTP) or
``SAGA_TRACE_FILE`` (JSON lines, for tests and debugging) is set; without them the API's no-op
tracer is used and costs next to nothing.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

_enabled = False


class JsonLinesExporter(SpanExporter):
    """Appends finished spans to a file, one JSON object a line (the tests read them)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._lock = threading.Lock()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = []
        for s in spans:
            ctx = s.get_span_context()
            lines.append(json.dumps({
                "name": s.name,
                "trace_id": format(ctx.trace_id, "032x") if ctx else None,
                "span_id": format(ctx.span_id, "016x") if ctx else None,
                "parent_span_id": format(s.parent.span_id, "016x") if s.parent else None,
                "kind": s.kind.name,
                "service": s.resource.attributes.get("service.name"),
                "start_ns": s.start_time, "end_ns": s.end_time,
                "attributes": {k: v for k, v in (s.attributes or {}).items()
                               if isinstance(v, str | int | float | bool)},
            }))
        with self._lock, open(self._path, "a") as f:
            f.write("\n".join(lines) + "\n")
        return SpanExportResult.SUCCESS


def configure(service: str) -> bool:
    """Installs a tracer provider if an exporter is configured; returns whether it did."""
    global _enabled
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    trace_file = os.environ.get("SAGA_TRACE_FILE")
    if not endpoint and not trace_file:
        return False
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if trace_file:
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(trace_file)))
    trace.set_tracer_provider(provider)
    _enabled = True
    return True


def enabled() -> bool:
    return _enabled


def tracer() -> trace.Tracer:
    return trace.get_tracer("sagakit")


def current_traceparent() -> str | None:
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get("traceparent")


def context_from(traceparent: str | None) -> otel_context.Context | None:
    """The context a stored or received ``traceparent`` names (None: start a new trace)."""
    return extract({"traceparent": traceparent}) if traceparent else None


def attributes(**values: Any) -> dict[str, Any]:
    return {f"saga.{k}": v for k, v in values.items() if v is not None}

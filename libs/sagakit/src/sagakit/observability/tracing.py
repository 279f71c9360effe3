"""OpenTelemetry: one trace per saga, carried across the broker.

The trace context travels like the saga's own ids: the unit of work stores the current
``traceparent`` with each outbox row (and its ``tracestate``, when the trace has one, in the
row's headers), the relay publishes under a PRODUCER span (``send {topic}``) that continues it
and puts its own context in the Kafka headers, and the consumer opens a CONSUMER span
(``process {topic}``) from those headers, inside which the handler runs and emits. Both follow
OpenTelemetry's messaging semantic conventions (``messaging_attributes``). Work that starts later from stored
state (a payment retry, a deadline) continues from the traceparent stored with that state.

Nothing is exported unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` (OTLP over HTTP) or
``SAGA_TRACE_FILE`` (JSON lines, for tests and debugging) is set. Without them no span is made
at all unless there is a trace to pass on: the API's no-op tracer still took 5–12 % of each
service's running samples under load (a context manager, context attach and detach, the
propagators, a tracer looked up on every message). A ``traceparent`` that arrives is still
carried on, as the no-op tracer would: a service without an exporter does not cut the trace of
the services around it.
"""

from __future__ import annotations

import contextlib
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
from opentelemetry.trace import SpanKind

_enabled = False
_tracer: trace.Tracer | None = None
# What ``span`` gives when it makes none: the API's invalid span, on which setting an attribute
# or a status does nothing, as on a no-op tracer's span.
_NO_SPAN: contextlib.AbstractContextManager[trace.Span] = contextlib.nullcontext(trace.INVALID_SPAN)


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
    global _tracer
    if _tracer is None:
        # A proxy until a provider is installed, which it then delegates to.
        _tracer = trace.get_tracer("sagakit")
    return _tracer


def _carrying_a_trace() -> bool:
    return trace.get_current_span().get_span_context().is_valid


def span(name: str, *, traceparent: str | None = None, tracestate: str | None = None,
         kind: SpanKind = SpanKind.INTERNAL,
         attributes: dict[str, Any] | None = None) -> contextlib.AbstractContextManager[Any]:
    """A span named ``name``, continuing ``traceparent`` (with its ``tracestate``) if given,
    else the current trace; nothing at all when no exporter is configured and there is no trace
    to pass on."""
    if not _enabled and traceparent is None and not _carrying_a_trace():
        return _NO_SPAN
    return tracer().start_as_current_span(name, context=context_from(traceparent, tracestate),
                                          kind=kind, attributes=attributes)


TRACE_HEADERS = ("traceparent", "tracestate")


def current_trace_headers() -> dict[str, str]:
    """The current context as W3C Trace Context headers: ``traceparent`` and, when the trace
    carries vendor state, ``tracestate``; nothing when there is no trace."""
    if not _enabled and not _carrying_a_trace():
        return {}
    carrier: dict[str, str] = {}
    inject(carrier)
    return {k: v for k, v in carrier.items() if k in TRACE_HEADERS and v}


def current_traceparent() -> str | None:
    return current_trace_headers().get("traceparent")


def current_tracestate() -> str | None:
    return current_trace_headers().get("tracestate")


def context_from(traceparent: str | None,
                 tracestate: str | None = None) -> otel_context.Context | None:
    """The context a stored or received ``traceparent`` (and ``tracestate``) names (None:
    start a new trace)."""
    if not traceparent:
        return None
    return extract({"traceparent": traceparent, **({"tracestate": tracestate}
                                                   if tracestate else {})})


def messaging_attributes(operation: str, topic: str, key: str | None, *,
                         partition: int | None = None, offset: int | None = None,
                         group: str | None = None) -> dict[str, Any]:
    """OpenTelemetry's messaging semantic conventions for a Kafka ``send`` or ``process``
    span (its name is ``f"{operation} {topic}"``)."""
    out: dict[str, Any] = {"messaging.system": "kafka", "messaging.operation.type": operation,
                           "messaging.operation.name": operation,
                           "messaging.destination.name": topic}
    optional = {"messaging.kafka.message.key": key,
                "messaging.destination.partition.id": None if partition is None
                else str(partition),
                "messaging.kafka.offset": offset, "messaging.consumer.group.name": group}
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def attributes(**values: Any) -> dict[str, Any]:
    return {f"saga.{k}": v for k, v in values.items() if v is not None}


def annotate_current_span(**values: Any) -> None:
    """Sets ``saga.*`` attributes on the current span, if one is being recorded (an HTTP
    request's, under the FastAPI instrumentation): nothing at all without an exporter."""
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(attributes(**values))

"""Tracing without an exporter: no span work on the hot path, yet a trace that arrives is passed
on (the spans with an exporter are tested end to end in tests/e2e/test_tracing.py)."""

from __future__ import annotations

import contextlib

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from sagakit.observability import tracing

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_without_an_exporter_and_without_a_trace_no_span_is_made() -> None:
    assert not tracing.enabled()
    with tracing.span("StockVerificado process", kind=SpanKind.CONSUMER,
                      attributes=tracing.attributes(id="s-1")) as current:
        # One shared null context, not a no-op span made and attached for every message; what
        # it gives takes attributes as a span does (the consumer marks duplicates on it).
        assert current is trace.INVALID_SPAN
        current.set_attribute("saga.duplicate", True)
        assert not trace.get_current_span().get_span_context().is_valid
        assert tracing.current_traceparent() is None
    assert isinstance(tracing.span("db commit"), contextlib.nullcontext)


def test_without_an_exporter_a_received_trace_is_carried_on() -> None:
    with tracing.span("StockVerificado process", traceparent=TRACEPARENT,
                      kind=SpanKind.CONSUMER):
        # What the handler emits inside carries the same trace on (the no-op tracer's
        # non-recording span keeps the received context).
        assert tracing.current_traceparent() == TRACEPARENT
        # A nested span (the unit of work's commit) does not break it either.
        with tracing.span("db commit"):
            assert tracing.current_traceparent() == TRACEPARENT
    assert tracing.current_traceparent() is None

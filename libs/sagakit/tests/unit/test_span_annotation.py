"""The standard's span id of an HTTP request is set on the request's OpenTelemetry span when one
is recorded, and costs nothing when none is."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from sagakit.observability import tracing


def test_the_recorded_span_gets_the_saga_attributes() -> None:
    # A provider of the test's own: the process-wide one stays unset (tracing disabled).
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("POST /orders") as span:
        tracing.annotate_current_span(span_id="9f1c0c9e-5d0e-4a53-9d54-3f0f5d0b1a11")
    assert span.attributes is not None
    assert span.attributes["saga.span_id"] == "9f1c0c9e-5d0e-4a53-9d54-3f0f5d0b1a11"


def test_without_a_recorded_span_nothing_happens() -> None:
    assert not trace.get_current_span().is_recording()
    tracing.annotate_current_span(span_id="9f1c0c9e-5d0e-4a53-9d54-3f0f5d0b1a11")

"""pagos' own Prometheus series, beside the plumbing's (``sagakit.observability.metrics``)."""

from __future__ import annotations

from prometheus_client import Counter

from pagos.domain.payment import Refusal

REFUNDS_REFUSED = Counter(
    "saga_refund_refused_total",
    "Compensations pagos refused to act on: the saga's stock was allocated, or the event names "
    "another order than the payment's",
    ["service", "reason"],
)


def initialise(service: str) -> None:
    """Every reason at zero from the start: an alert on increase() misses a series whose first
    sample is 1."""
    for reason in Refusal:
        REFUNDS_REFUSED.labels(service, reason.value)

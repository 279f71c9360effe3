"""pedidos' own Prometheus series, beside the plumbing's (``sagakit.observability.metrics``),
created at zero by ``initialise`` (its ``ServiceDefinition.metrics_at_zero``)."""

from __future__ import annotations

from pedidos.domain.order import CancelReason, PaymentMismatch
from sagakit.observability import metrics

# inventario counts its own under the same name (sagakit's shared_counter).
PAYMENT_MISMATCHES = metrics.shared_counter(
    "saga_payment_mismatch_total",
    "Payment events ignored because they are not the payment the saga expects",
    ["service", "reason"],
)


def initialise(service: str) -> None:
    """Every reason at zero from the start: an alert on increase() misses a series whose
    first sample is 1."""
    for reason in CancelReason:
        metrics.COMPENSATIONS.labels(service, reason.value)
    for mismatch in PaymentMismatch:
        PAYMENT_MISMATCHES.labels(service, mismatch.value)

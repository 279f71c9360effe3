"""inventario's own Prometheus series, beside the plumbing's (``sagakit.observability.metrics``),
created at zero by ``initialise`` (its ``ServiceDefinition.metrics_at_zero``)."""

from __future__ import annotations

from enum import StrEnum

from prometheus_client import Counter

from inventario.domain.payment_match import PaymentMismatch
from saga_contracts.registry import latest
from sagakit.observability import metrics

# pedidos counts its own under the same name (sagakit's shared_counter).
PAYMENT_MISMATCHES = metrics.shared_counter(
    "saga_payment_mismatch_total",
    "Payment events ignored because they are not the payment the saga expects",
    ["service", "reason"],
)


class ReservationOutcome(StrEnum):
    RESERVED = "reserved"    # a validation held units for its saga
    CONFIRMED = "confirmed"  # its payment's allocation took them
    RELEASED = "released"    # its order was cancelled first
    EXPIRED = "expired"      # its deadline passed first (the expiry job)


RESERVATIONS = Counter(
    "saga_reservations_total",
    "Stock reservations (reserve_then_pay) by outcome: reserved, then confirmed, released or "
    "expired (one row per saga and product)",
    ["service", "outcome"],
)


def initialise(service: str) -> None:
    """Every series at zero from the start: an alert on increase() misses a series whose
    first sample is 1. inventario releases stock for whatever reason the order was
    cancelled: its compensations carry ``OrdenCancelada``'s reasons."""
    for reason in latest("OrdenCancelada").document["properties"]["reason"]["enum"]:
        metrics.COMPENSATIONS.labels(service, reason)
    for mismatch in PaymentMismatch:
        PAYMENT_MISMATCHES.labels(service, mismatch.value)
    for outcome in ReservationOutcome:
        RESERVATIONS.labels(service, outcome.value)

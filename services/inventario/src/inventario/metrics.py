"""inventario's own Prometheus series, beside the plumbing's (``sagakit.observability.metrics``)."""

from __future__ import annotations

from enum import StrEnum

from prometheus_client import Counter


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
# At zero from the start: a rate or an increase() misses a series whose first sample is 1.
for _outcome in ReservationOutcome:
    RESERVATIONS.labels("inventario", _outcome.value)

"""inventario creates its own series at zero as it starts (its ServiceDefinition's hook): the
reasons it releases stock for (OrdenCancelada's) and those it ignores payment events for, with
the names and labels the dashboards and alerts read."""

from __future__ import annotations

from prometheus_client import REGISTRY

from inventario import metrics
from inventario.domain.payment_match import PaymentMismatch


def test_every_reason_is_exposed_at_zero_from_the_start() -> None:
    metrics.initialise("inventario-zero")
    for reason in ("stock_insuficiente", "precio_rechazado", "pago_rechazado"):
        assert REGISTRY.get_sample_value("saga_compensations_total", {
            "service": "inventario-zero", "reason": reason}) == 0
    for mismatch in PaymentMismatch:
        assert REGISTRY.get_sample_value("saga_payment_mismatch_total", {
            "service": "inventario-zero", "reason": mismatch.value}) == 0

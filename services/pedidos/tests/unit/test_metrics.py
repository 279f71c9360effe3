"""pedidos creates its own series at zero as it starts (its ServiceDefinition's hook): every
reason it counts compensations and ignored payment events under, with the names and labels the
dashboards and alerts read."""

from __future__ import annotations

from prometheus_client import REGISTRY

from pedidos import metrics
from pedidos.domain.order import SAGA_TYPE, CancelReason, PaymentMismatch
from saga_contracts import topology


def test_every_reason_is_exposed_at_zero_from_the_start() -> None:
    metrics.initialise("pedidos-zero")
    for reason in CancelReason:
        assert REGISTRY.get_sample_value("saga_compensations_total", {
            "service": "pedidos-zero", "reason": reason.value}) == 0
    for mismatch in PaymentMismatch:
        assert REGISTRY.get_sample_value("saga_payment_mismatch_total", {
            "service": "pedidos-zero", "reason": mismatch.value}) == 0


def test_the_saga_type_is_the_contracts() -> None:
    """pedidos writes its sagas' type in their rows; every service labels its metrics with
    the contract's (saga_contracts.topology): the two are one name."""
    assert SAGA_TYPE == topology.SAGA_TYPE

"""What sagakit creates at zero is the plumbing's and the saga types a service names; a
service's own series (its reasons included) are its hook's; a counter two services declare
under one name is one counter in a process that imports both."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from sagakit.observability import metrics


def test_the_plumbing_series_and_the_saga_types_named_start_at_zero() -> None:
    metrics.initialise("svc-zero", ["OrdenSolicitada"], ["SomeSaga"])
    for status in metrics.FINAL_STATUSES:
        assert REGISTRY.get_sample_value(
            "saga_duration_seconds_count", {"saga_type": "SomeSaga", "final_status": status}) == 0
    for error_type in metrics.ERROR_TYPES:
        assert REGISTRY.get_sample_value("saga_step_errors_total", {
            "service": "svc-zero", "event_type": "OrdenSolicitada", "error_type": error_type}) == 0
    assert REGISTRY.get_sample_value("outbox_pending_messages", {"service": "svc-zero"}) == 0
    # No reason of a service's own: its hook creates those.
    assert not [s for m in REGISTRY.collect() for s in m.samples
                if s.name == "saga_compensations_total" and s.labels["service"] == "svc-zero"]


def test_a_counter_declared_twice_under_one_name_is_one_counter() -> None:
    first = metrics.shared_counter("test_shared_total", "Declared by two services", ["service"])
    again = metrics.shared_counter("test_shared_total", "Declared by two services", ["service"])
    assert again is first
    first.labels("a").inc()
    assert REGISTRY.get_sample_value("test_shared_total", {"service": "a"}) == 1


def test_a_counter_declared_again_with_other_labels_is_refused() -> None:
    metrics.shared_counter("test_shared_labels_total", "Declared by two services", ["service"])
    with pytest.raises(ValueError, match="test_shared_labels_total is declared with the labels"):
        metrics.shared_counter("test_shared_labels_total", "Declared by two services",
                               ["service", "reason"])

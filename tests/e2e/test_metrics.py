"""After one saga, every service's /metrics exposes the standard's five metrics (docs/standard.md#metrics)."""

from __future__ import annotations

from saga_harness import config
from saga_harness.clients import Saga, new_sku, order_body

MANDATED = {
    "saga_duration_seconds": ("histogram", {"saga_type", "final_status"}),
    "saga_step_errors_total": ("counter", {"service", "event_type", "error_type"}),
    "saga_compensations_total": ("counter", {"service", "reason"}),
    "outbox_pending_messages": ("gauge", {"service"}),
    "dlq_messages_total": ("gauge", {"service", "event_type"}),
}


async def test_each_service_exposes_the_five_mandated_metrics(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 1)
    placed = await saga.place(order_body([(sku, 1)]))
    await saga.wait_status(placed["order_id"], "COMPLETADA")
    for service, base in (("pedidos", config.PEDIDOS), ("inventario", config.INVENTARIO),
                          ("pagos", config.PAGOS)):
        text = (await saga.http.get(f"{base}/metrics")).text
        for name, (kind, _) in MANDATED.items():
            # Counters are typed under their full name or without "_total", by client version.
            family = name.removesuffix("_total")
            assert (f"# TYPE {name} {kind}" in text or f"# TYPE {family} {kind}" in text), \
                (service, name)
            assert f"{name}{{" in text or f"{name}_count{{" in text, (service, name)
        assert f'outbox_pending_messages{{service="{service}"}}' in text, service
    pedidos = (await saga.http.get(f"{config.PEDIDOS}/metrics")).text
    assert 'saga_duration_seconds_bucket{final_status="success",le="0.1",' \
           'saga_type="OrderCheckThenPay"}' in pedidos


def _series(text: str, name: str) -> list[dict[str, str]]:
    """The label sets of ``name``'s samples in a /metrics page."""
    found = []
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels = line[len(name) + 1:line.rindex("}")]
            found.append(dict((pair.split("=", 1)[0], pair.split("=", 1)[1].strip('"'))
                              for pair in labels.split(",")))
    return found


async def test_each_service_exposes_its_own_series_from_its_start(saga: Saga) -> None:
    """The series a service names itself (its ServiceDefinition's metrics_at_zero), under the
    names and labels the alerts and dashboards read, before anything was counted in them."""
    expected = {
        config.PEDIDOS: [("saga_payment_mismatch_total", {"service": "pedidos",
                                                          "reason": "amount_mismatch"}),
                         ("saga_compensations_total", {"service": "pedidos",
                                                       "reason": "pago_rechazado"})],
        config.INVENTARIO: [("saga_payment_mismatch_total", {"service": "inventario",
                                                             "reason": "no_payment_requested"}),
                            ("saga_compensations_total", {"service": "inventario",
                                                          "reason": "saga_expirada"})],
        config.PAGOS: [("saga_sealed_token_mismatch_total", {"service": "pagos"}),
                       ("saga_compensations_total", {"service": "pagos", "reason": "refund"})],
    }
    for base, series in expected.items():
        text = (await saga.http.get(f"{base}/metrics")).text
        for name, labels in series:
            assert labels in _series(text, name), (base, name, labels)
    pagos = (await saga.http.get(f"{config.PAGOS}/metrics")).text
    assert "# TYPE payment_gateway_request_duration_seconds histogram" in pagos


def test_the_label_names_are_the_standards() -> None:
    from prometheus_client import REGISTRY

    from sagakit.observability import metrics  # noqa: F401

    declared = {c._name: set(c._labelnames) for c in REGISTRY._collector_to_names  # type: ignore[attr-defined]
                if hasattr(c, "_labelnames")}
    for name, (kind, labels) in MANDATED.items():
        family = name.removesuffix("_total") if kind == "counter" else name
        assert declared[family] == labels, name

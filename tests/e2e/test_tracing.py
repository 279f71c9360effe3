"""One trace per saga across the three services, unbroken at the broker (OpenTelemetry).

The services are restarted with SAGA_TRACE_FILE (a JSON-lines span exporter) and restored
afterwards; the spans of one order must all share the trace of its POST /orders request.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.waiting import wait_for

SERVICES = ("pedidos", "inventario", "pagos")


def _spans(folder: Path) -> list[dict]:
    spans = []
    for f in folder.glob("*.jsonl"):
        with contextlib.suppress(FileNotFoundError):
            spans += [json.loads(line) for line in f.read_text().splitlines() if line]
    return spans


async def test_one_trace_follows_the_saga_through_every_service(saga: Saga,
                                                                 traced: Path) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 3)
    placed = await saga.place(order_body([(sku, 1)]))
    await saga.wait_status(placed["order_id"], "COMPLETADA")

    def saga_spans(spans: list[dict]) -> list[dict]:
        return [s for s in spans if s["attributes"].get("saga.id") == placed["saga_id"]]

    async def collected() -> list[dict]:
        return _spans(traced)

    # Kafka spans as OpenTelemetry's messaging conventions name them: "send {topic}",
    # "process {topic}"; which event a CONSUMER span handled is its saga.event_type.
    def named(s: dict) -> tuple[str, str]:
        if s["kind"] == "CONSUMER":
            return s["service"], f'{s["attributes"]["saga.event_type"]} {s["name"]}'
        return s["service"], s["name"]

    expected = {("inventario", "OrdenSolicitada process order-events"),
                ("pagos", "StockVerificado process inventory-events"),
                ("pagos", "gateway charge"),
                ("inventario", "PagoExitoso process payment-events"),
                ("pedidos", "StockAsignado process inventory-events"),
                ("pedidos", "send order-events"), ("inventario", "send inventory-events"),
                ("pagos", "send payment-events")}
    spans = await wait_for(collected, lambda ss: expected <= {named(s) for s in saga_spans(ss)},
                           timeout=15, what="every step's span exported")
    request = next(s for s in spans if s["service"] == "pedidos" and s["kind"] == "SERVER"
                   and "POST /orders" in s["name"] and s["parent_span_id"] is None
                   and any(x["trace_id"] == s["trace_id"] for x in saga_spans(spans)))
    ours = saga_spans(spans)
    assert {s["trace_id"] for s in ours} == {request["trace_id"]}, "one trace for the saga"
    assert {s["service"] for s in ours} == set(SERVICES)
    by_id = {s["span_id"]: s for s in spans}
    for s in ours:  # every span hangs from the request, through its parents
        node = s
        while node["parent_span_id"] is not None:
            node = by_id[node["parent_span_id"]]
        assert node is request, s["name"]
    consumer = next(s for s in ours
                    if named(s) == ("inventario", "PagoExitoso process payment-events"))
    assert by_id[consumer["parent_span_id"]]["name"] == "send payment-events"
    assert consumer["attributes"]["messaging.system"] == "kafka"
    assert consumer["attributes"]["messaging.consumer.group.name"] == "inventario"
    assert consumer["attributes"]["messaging.kafka.message.key"] == placed["saga_id"]
    # pedidos names the trace with the saga (the operator console shows it on the timeline).
    status = await saga.http.get(f"{saga.at.pedidos}/sagas/{placed['saga_id']}/status")
    assert status.json()["trace_id"] == request["trace_id"]

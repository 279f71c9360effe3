"""Who consumes which event: the saga's topology as the contract states it.

Each event type has one producer and one topic (its schema's ``x-producer`` and ``x-topic``);
``CONSUMES`` names the event types each service's consumer handles. The services subscribe to
exactly these (``deploy/tests/test_kafka_acls.py`` compares them with each service's
subscriptions), Kafka's ACLs let each service read exactly their topics, and a dead letter can
be replayed to a service only as one of these events on its own topic: what a letter says
about itself is not believed (``sagakit.operations.replay``).
"""

from __future__ import annotations

from collections.abc import Mapping

from saga_contracts import registry

SAGA_TYPE = "OrderCheckThenPay"
"""The saga these services take part in (the standard's ``tipo_de_saga``): the ``saga_type``
label of each one's metrics."""

CONSUMES: Mapping[str, frozenset[str]] = {
    "pedidos": frozenset({
        "StockVerificado", "StockNoDisponible", "PrecioRechazado", "PrecioRechazado_v2",
        "PagoExitoso",
        "PagoRechazado", "StockAsignado", "FalloAsignacion", "ReembolsoEjecutado",
        "FalloReembolso"}),
    "inventario": frozenset({"OrdenSolicitada", "PagoExitoso", "OrdenCancelada"}),
    "pagos": frozenset({"StockVerificado", "StockAsignado", "FalloAsignacion",
                        "OrdenCancelada"}),
}
SERVICES = tuple(CONSUMES)


def consumes(service: str, event_type: str) -> bool:
    return event_type in CONSUMES.get(service, frozenset())


def topics_read(service: str) -> frozenset[str]:
    """The topics ``service``'s consumer reads: those of the events it handles."""
    return frozenset(registry.topic_of(e) for e in CONSUMES.get(service, frozenset()))


def replayable(service: str, topic: str, event_type: str) -> str | None:
    """None when an ``event_type`` record on ``topic`` may be replayed to ``service``; else why
    not."""
    if service not in CONSUMES:
        return f"no service {service!r} consumes events"
    if not consumes(service, event_type):
        return f"{service} does not consume {event_type!r}"
    expected = registry.topic_of(event_type)
    if topic != expected:
        return f"{event_type} travels on {expected!r}, not {topic!r}"
    return None


def all_replayable_topics() -> frozenset[str]:
    """Every topic some service consumes: the only ones a replay is ever written to."""
    return frozenset(t for s in SERVICES for t in topics_read(s))

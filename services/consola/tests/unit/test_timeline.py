"""A saga's timeline from pedidos' history and pagos' gateway calls: each thing in its lane, in
time order, with the time between them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from consola.domain.timeline import build, format_gap, lane_of_actor
from consola.entrypoints import swimlanes

T0 = datetime(2026, 12, 6, 10, 0, 0, tzinfo=UTC)


def at(ms: int) -> str:
    return (T0 + timedelta(milliseconds=ms)).isoformat()


HISTORY = [
    {"at": at(0), "event_type": "OrdenSolicitada", "from_status": None,
     "to_status": "PENDIENTE_VALIDACION", "actor": "c-42", "message_id": None, "detail": {}},
    {"at": at(40), "event_type": "StockVerificado", "from_status": "PENDIENTE_VALIDACION",
     "to_status": "PENDIENTE_PAGO", "actor": "inventario", "message_id": "m-1",
     "detail": {"source_service": "inventario"}},
    {"at": at(130), "event_type": "PagoExitoso", "from_status": "PENDIENTE_PAGO",
     "to_status": "PENDIENTE_ASIGNACION", "actor": "pagos", "message_id": "m-2",
     "detail": {"source_service": "pagos"}},
    {"at": at(150), "event_type": "StockAsignado", "from_status": "PENDIENTE_ASIGNACION",
     "to_status": "COMPLETADA", "actor": "inventario", "message_id": "m-3",
     "detail": {"source_service": "inventario"}},
]
PAYMENTS = [{"attempts": [{"kind": "charge", "attempt": 1, "at": at(90),
                           "outcome": "approved", "detail": "ch_1"}]}]


def test_each_event_is_in_the_lane_of_the_service_that_sent_it_joined_to_pedidos() -> None:
    timeline = build("s-1", HISTORY, PAYMENTS, status="COMPLETADA")
    assert [s.lanes for s in timeline.steps] == [
        ("pedidos",), ("inventario", "pedidos"), ("gateway",), ("pagos", "pedidos"),
        ("inventario", "pedidos")]
    stock = timeline.steps[1]
    assert [m.label for m in stock.marks] == ["StockVerificado",
                                              "PENDIENTE_VALIDACION → PENDIENTE_PAGO"]
    assert timeline.steps[2].marks[0].label == "charge #1: approved"


def test_the_time_between_steps_and_the_whole() -> None:
    timeline = build("s-1", HISTORY, PAYMENTS)
    assert [format_gap(s.since_previous) for s in timeline.steps] == [
        "start", "+40 ms", "+50 ms", "+40 ms", "+20 ms"]
    assert timeline.duration == timedelta(milliseconds=150)
    assert format_gap(timedelta(seconds=2.25)) == "+2.2 s"
    assert format_gap(timedelta(seconds=125)) == "+2 min 5 s"


def test_an_entry_that_moved_nothing_is_said_so_in_pedidos_lane() -> None:
    late = {"at": at(200), "event_type": "PagoExitoso", "from_status": "COMPLETADA",
            "to_status": "COMPLETADA", "actor": "pagos", "message_id": "m-9",
            "detail": {"source_service": "pagos", "ignored": True}}
    step = build("s-1", [*HISTORY, late]).steps[-1]
    assert [(m.lane, m.kind) for m in step.marks] == [("pagos", "event"), ("pedidos", "event")]
    assert "ignored=True" in step.marks[1].detail


def test_who_acted_decides_the_lane() -> None:
    assert lane_of_actor("inventario") == "inventario"
    assert lane_of_actor("pagos") == "pagos"
    for pedidos_side in ("pedidos.deadlines", "operator:ana", "customer:c-42", "c-42"):
        assert lane_of_actor(pedidos_side) == "pedidos"


def test_the_drawing_puts_each_mark_in_its_lane_column_and_row() -> None:
    timeline = build("s-1", HISTORY, PAYMENTS)
    drawing = swimlanes.draw(timeline)
    for mark in drawing.marks:
        assert mark.x == swimlanes.lane_x(mark.lane)
        assert mark.y == swimlanes.HEADER + swimlanes.ROW * mark.step + swimlanes.ROW / 2
    assert len(drawing.rows) == len(timeline.steps) and len(drawing.links) == 3
    assert drawing.rows[1].gap == "+40 ms" and drawing.rows[0].clock == "10:00:00.000"


def test_history_keeps_pedidos_order_and_gateway_calls_go_where_their_time_says() -> None:
    # The second entry's transaction began first and waited for the first's lock.
    swapped = [HISTORY[0], {**HISTORY[3], "at": at(140)}, {**HISTORY[2], "at": at(139)}]
    timeline = build("s-1", swapped, PAYMENTS)
    assert [s.marks[0].label for s in timeline.steps] == [
        "OrdenSolicitada", "charge #1: approved", "StockAsignado", "PagoExitoso"]
    assert [s.source for s in timeline.steps] == ["history", "gateway", "history", "history"]
    assert format_gap(timeline.steps[-1].since_previous) == "−1 ms"

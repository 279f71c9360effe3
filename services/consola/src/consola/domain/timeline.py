"""A saga's timeline: what happened to it, in time order, each thing in the lane of the part
that did it (pedidos, inventario, pagos, the payment gateway), with the time between them.

Built from what the services publish: pedidos' history of the saga (``GET /sagas/{id}/history``:
every event it consumed and every transition it made, at the moment it recorded them, with the
service the event came from) and pagos' payment records (``GET /payments?saga_id=``: each call
to the gateway, with its outcome). An event another service sent is a mark in that service's
lane joined to pedidos' transition it caused; an entry pedidos made by itself (the order, a
deadline, a cancellation asked for) is a mark in pedidos' lane alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

LANES = ("pedidos", "inventario", "pagos", "gateway")
Lane = Literal["pedidos", "inventario", "pagos", "gateway"]
Kind = Literal["event", "transition", "gateway"]


@dataclass(frozen=True)
class Mark:
    lane: Lane
    kind: Kind
    label: str
    detail: str = ""


@dataclass(frozen=True)
class Step:
    """One moment of the saga: one history entry (an event and the transition it caused), or
    one gateway call. ``since_previous`` is the time from the step before (None for the first)."""

    at: datetime
    marks: tuple[Mark, ...]
    since_previous: timedelta | None
    message_id: str | None = None
    actor: str = ""

    @property
    def lanes(self) -> tuple[Lane, ...]:
        return tuple(m.lane for m in self.marks)

    @property
    def source(self) -> Literal["history", "gateway"]:
        """Where the step comes from: pedidos' history, or pagos' record of a gateway call."""
        return "gateway" if self.marks[0].kind == "gateway" else "history"


@dataclass(frozen=True)
class Timeline:
    saga_id: str
    steps: tuple[Step, ...]
    status: str | None = None
    order_id: str | None = None
    trace_id: str | None = None

    @property
    def duration(self) -> timedelta | None:
        return self.steps[-1].at - self.steps[0].at if self.steps else None


def lane_of_actor(actor: str) -> Lane:
    """The lane of who made a history entry: a participant that sent the event, or pedidos
    (its deadlines, an operator's or customer's request to it, the order placed)."""
    name = actor.split(".", 1)[0]
    if name in ("inventario", "pagos"):
        return name  # type: ignore[return-value]
    return "pedidos"


def _when(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


RawStep = tuple[datetime, tuple[Mark, ...], str | None, str]


def history_step(entry: Mapping[str, Any]) -> RawStep:
    event, actor = str(entry["event_type"]), str(entry["actor"])
    frm, to = entry.get("from_status"), entry.get("to_status")
    detail = entry.get("detail") or {}
    lane = lane_of_actor(actor)
    notes = ", ".join(f"{k}={v}" for k, v in sorted(detail.items()) if k != "source_service")
    moved = f"{frm or '—'} → {to}" if to and to != frm else None
    if lane == "pedidos":
        marks: tuple[Mark, ...] = (Mark("pedidos", "transition" if moved else "event", event,
                                        "; ".join(filter(None, [moved, f"by {actor}", notes]))),)
    else:
        marks = (Mark(lane, "event", event, notes),)
        if moved:
            marks += (Mark("pedidos", "transition", moved, f"on {event}"),)
        else:
            marks += (Mark("pedidos", "event", "recorded, state unchanged", notes),)
    return _when(entry["at"]), marks, entry.get("message_id"), actor


def gateway_steps(payments: Iterable[Mapping[str, Any]]) -> list[RawStep]:
    out: list[RawStep] = []
    for payment in payments:
        for attempt in payment.get("attempts") or ():
            kind = str(attempt.get("kind", "call"))
            label = f"{kind} #{attempt.get('attempt', '?')}: {attempt.get('outcome', '?')}"
            out.append((_when(attempt["at"]),
                        (Mark("gateway", "gateway", label, str(attempt.get("detail") or "")),),
                        None, "pagos"))
    return out


def build(saga_id: str, history: Sequence[Mapping[str, Any]],
          payments: Sequence[Mapping[str, Any]] = (), *, status: str | None = None,
          order_id: str | None = None, trace_id: str | None = None) -> Timeline:
    """The timeline of ``history`` and the gateway calls of ``payments``. History entries keep
    pedidos' order, the order its state changed in: their times are those of the transactions
    that wrote them, which can be a little out of order when two events of the saga arrive at
    once and one waited for the other's lock. Each gateway call goes before the first entry
    recorded after it."""
    calls = sorted(gateway_steps(payments), key=lambda r: r[0])
    raw: list[RawStep] = []
    for entry in map(history_step, history):
        while calls and calls[0][0] < entry[0]:
            raw.append(calls.pop(0))
        raw.append(entry)
    raw.extend(calls)
    steps: list[Step] = []
    for at, marks, message_id, actor in raw:
        since = at - steps[-1].at if steps else None
        steps.append(Step(at, marks, since, message_id, actor))
    return Timeline(saga_id, tuple(steps), status, order_id, trace_id)


def format_gap(gap: timedelta | None) -> str:
    """``+12 ms``, ``+1.3 s``, ``+2 min 5 s``: the time between two steps, as read at a glance."""
    if gap is None:
        return "start"
    if gap < timedelta(0):
        return f"−{format_gap(-gap)[1:]}"
    ms = gap.total_seconds() * 1000
    if ms < 1000:
        return f"+{ms:.0f} ms"
    if ms < 60_000:
        return f"+{ms / 1000:.1f} s"
    minutes, seconds = divmod(int(ms // 1000), 60)
    return f"+{minutes} min {seconds} s"

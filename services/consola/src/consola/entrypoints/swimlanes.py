"""Where each mark of a timeline is drawn: the lanes are columns (pedidos, inventario, pagos,
gateway), time runs down, one row per step, the time since the step before in the left gutter.
Geometry only: the template turns it into SVG, drawn on the server (no script in the page)."""

from __future__ import annotations

from dataclasses import dataclass

from consola.domain.timeline import LANES, Mark, Timeline, format_gap

GUTTER = 120
LANE_WIDTH = 230
HEADER = 44
ROW = 50
SHAPE = {"event": "circle", "transition": "box", "gateway": "diamond"}


@dataclass(frozen=True)
class DrawnMark:
    x: float
    y: float
    lane: str
    kind: str
    shape: str
    label: str
    title: str
    step: int


@dataclass(frozen=True)
class Link:
    """The line from the event a participant sent to pedidos' transition it caused."""

    x1: float
    x2: float
    y: float


@dataclass(frozen=True)
class Row:
    y: float
    gap: str
    clock: str


@dataclass(frozen=True)
class Drawing:
    width: int
    height: int
    lanes: tuple[tuple[str, float], ...]
    rows: tuple[Row, ...]
    marks: tuple[DrawnMark, ...]
    links: tuple[Link, ...]


def lane_x(lane: str) -> float:
    return GUTTER + LANE_WIDTH * LANES.index(lane) + LANE_WIDTH / 2


def _title(mark: Mark) -> str:
    return f"{mark.label} ({mark.lane})" + (f": {mark.detail}" if mark.detail else "")


def draw(timeline: Timeline) -> Drawing:
    marks: list[DrawnMark] = []
    links: list[Link] = []
    rows: list[Row] = []
    for i, step in enumerate(timeline.steps):
        y = HEADER + ROW * i + ROW / 2
        rows.append(Row(y, format_gap(step.since_previous),
                        step.at.strftime("%H:%M:%S.") + f"{step.at.microsecond // 1000:03d}"))
        xs = [lane_x(m.lane) for m in step.marks]
        if len(xs) > 1:
            links.append(Link(min(xs), max(xs), y))
        for mark, x in zip(step.marks, xs, strict=True):
            marks.append(DrawnMark(x, y, mark.lane, mark.kind, SHAPE[mark.kind], mark.label,
                                   _title(mark), i))
    return Drawing(GUTTER + LANE_WIDTH * len(LANES), HEADER + ROW * max(1, len(timeline.steps)),
                   tuple((lane, lane_x(lane)) for lane in LANES), tuple(rows), tuple(marks),
                   tuple(links))

"""The overview: sagas per state started within the last hour and, of those that ended, the
failure and compensation rates (``domain.outcomes``); dead letters per service and state, each
service's outbox backlog and the age of its oldest unpublished row, and how many payments wait
for a person. Every number is read from the published views."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from consola.domain.outcomes import Rates, final_status, rates
from consola.usecases.ports import OverviewReads

WINDOW_S = 3600


@dataclass(frozen=True)
class Backlog:
    service: str
    unpublished: int
    failed: int
    oldest_age_s: float | None


@dataclass(frozen=True)
class Overview:
    window_s: int
    sagas_per_state: list[tuple[str, int]]
    dead_letters: dict[str, dict[str, int]]
    """service → state → letters; every service, with no letter an empty dict."""
    backlog: list[Backlog]
    payments_needing_action: int

    @property
    def rates(self) -> Rates:
        return rates(self.sagas_per_state)

    @staticmethod
    def final_status(state: str) -> str:
        return final_status(state) or "active"

    @property
    def sagas(self) -> int:
        return sum(n for _, n in self.sagas_per_state)

    def open_letters(self, service: str) -> int:
        return self.dead_letters.get(service, {}).get("open", 0)


def _letters(rows: list[dict[str, Any]], services: list[str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {s: {} for s in services}
    for row in rows:
        out.setdefault(str(row["service"]), {})[str(row["state"])] = int(row["letters"])
    return out


async def overview(reads: OverviewReads, window_s: int = WINDOW_S) -> Overview:
    sagas = await reads.sagas_per_state(window_s)
    backlog = [Backlog(str(r["service"]), int(r["unpublished"]), int(r["failed"]),
                       None if r["oldest_age_s"] is None else float(r["oldest_age_s"]))
               for r in await reads.outbox_backlog()]
    return Overview(
        window_s=window_s,
        sagas_per_state=[(str(r["status"]), int(r["sagas"])) for r in sagas],
        dead_letters=_letters(await reads.dead_letters_per_state(), [b.service for b in backlog]),
        backlog=backlog,
        payments_needing_action=await reads.payments_needing_action_count())

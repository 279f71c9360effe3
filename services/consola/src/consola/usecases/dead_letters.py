"""Open dead letters, grouped as an operator decides on them: by the service that gave up, the
event type and the error class (each service's ``<service>_read.dead_letters_v1``), each with
its error history; and archiving one, with a reason, through the owning service's
``POST /operator/dead-letters/{id}/archive`` as the operator, whose ``sub`` it audits."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from consola.usecases.outcome import BadField, Outcome, required_text
from consola.usecases.ports import DeadLetterReads, OperatorActions

SERVICES = ("pedidos", "inventario", "pagos")
MAX_REASON = 500
"""The services' own limit (``sagakit.runtime.dead_letters_api.Archive``)."""


@dataclass(frozen=True)
class LetterGroup:
    service: str
    event_type: str
    error_class: str
    letters: list[dict[str, Any]] = field(default_factory=list)


def group(letters: list[dict[str, Any]]) -> list[LetterGroup]:
    """By (service, event type, error class), the largest group first; in a group the oldest
    letter first."""
    groups: dict[tuple[str, str, str], LetterGroup] = {}
    for letter in sorted(letters, key=lambda x: str(x["at"])):
        key = (str(letter["service"]), str(letter["event_type"] or "—"),
               str(letter["error_class"] or "—"))
        groups.setdefault(key, LetterGroup(*key)).letters.append(letter)
    return sorted(groups.values(), key=lambda g: (-len(g.letters), g.service, g.event_type,
                                                  g.error_class))


async def open_letter_groups(reads: DeadLetterReads) -> list[LetterGroup]:
    return group(await reads.open_dead_letters())


async def archive(actions: OperatorActions, service: str, dead_letter_id: str,
                  reason: str | None) -> Outcome:
    """What the service answered, said for a person. ``BadField`` before any call."""
    if service not in SERVICES:
        raise BadField("service", f"one of {', '.join(SERVICES)}")
    try:
        dead_letter_id = str(uuid.UUID(dead_letter_id))
    except ValueError:
        raise BadField("dead_letter_id", "a dead letter's id is a UUID") from None
    reason = required_text("reason", reason, MAX_REASON)
    answer = await actions.archive_dead_letter(service, dead_letter_id, reason)
    if answer.status == 200:
        return Outcome(True, 200, "Archived",
                       f"{service}'s dead letter {dead_letter_id} archived by "
                       f"{answer.body.get('operator')}: it leaves the open letters")
    if answer.status == 404:
        return Outcome(False, 404, "No such dead letter",
                       f"{service} knows no dead letter {dead_letter_id} (deleted past its "
                       "retention?)")
    if answer.status == 409:
        return Outcome(False, 409, "Not archived", str(answer.body.get("detail", "")))
    return Outcome(False, answer.status, f"Refused by {service}",
                   str(answer.body.get("detail", "")))

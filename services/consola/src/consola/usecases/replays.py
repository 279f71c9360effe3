"""Replaying dead letters from the console, one or a group (service, event type, error class),
each first as a dry run: the replayer sagactl uses (``sagakit.operations.replayer``), so a
replay trusts only the broker, is signed with the console's own key and published as the
``operator`` principal; a letter that does not match the broker is reported to its service as
forged (never replayed afterwards; the ForgedReplay alert fires), exactly as from sagactl. The
letters are read, and what came of them recorded, through the owning service's API with the
signed-in operator's token: the service audits that operator."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from consola.usecases.dead_letters import SERVICES, LetterGroup, group
from consola.usecases.outcome import BadField, Outcome
from consola.usecases.ports import DeadLetterReads
from sagakit.operations import DeadLetterApi, Replayer
from sagakit.operations import Outcome as Replayed
from sagakit.settings import KafkaClientSettings

GROUP_LIMIT = 100
"""Most letters one group replay sends (the oldest first); the page says when more wait."""


class CannotSign(Exception):
    """The console has no replay-signing key: it replays nothing."""


@dataclass(frozen=True)
class ReplayTools:
    """What the console replays with: its signing key (None: unset) and the ``operator``
    principal's Kafka settings."""

    signing_key: Ed25519PrivateKey | None
    kafka: KafkaClientSettings

    def replayer(self, api: DeadLetterApi, service: str, *, dry_run: bool) -> Replayer:
        key = self.signing_key
        if key is None:
            raise CannotSign("this console has no replay-signing key (CONSOLA_SIGNING_KEY or "
                             "CONSOLA_SIGNING_KEY_FILE): it replays nothing")

        def signing_key() -> Ed25519PrivateKey:
            return key

        return Replayer(service, api, signing_key, self.kafka, dry_run)


def checked_service(service: str) -> str:
    if service not in SERVICES:
        raise BadField("service", f"one of {', '.join(SERVICES)}")
    return service


def checked_letter_id(dead_letter_id: str) -> str:
    try:
        return str(uuid.UUID(dead_letter_id))
    except ValueError:
        raise BadField("dead_letter_id", "a dead letter's id is a UUID") from None


async def replay_one(tools: ReplayTools, api: DeadLetterApi, service: str, dead_letter_id: str,
                     *, dry_run: bool) -> Replayed:
    """One letter replayed (or, ``dry_run``, checked and shown). ``BadField`` before any call,
    ``CannotSign`` when the console has no key."""
    service, dead_letter_id = checked_service(service), checked_letter_id(dead_letter_id)
    return await tools.replayer(api, service, dry_run=dry_run).one(dead_letter_id)


async def open_group(reads: DeadLetterReads, service: str, event_type: str, error_class: str
                     ) -> LetterGroup:
    """The open letters of one group, as the dead-letters page groups them (an empty group when
    none is left)."""
    service = checked_service(service)
    for found in group(await reads.open_dead_letters()):
        if (found.service, found.event_type, found.error_class) == (
                service, event_type, error_class):
            return found
    return LetterGroup(service, event_type, error_class)


async def replay_group(tools: ReplayTools, api: DeadLetterApi, reads: DeadLetterReads,
                       service: str, event_type: str, error_class: str, *, dry_run: bool,
                       chosen: Sequence[str] | None = None) -> tuple[LetterGroup, list[Replayed]]:
    """The group's open letters, oldest first, each replayed (or checked) on its own.
    ``chosen``: only these of them (the letters the operator's dry run showed); a letter no
    longer open, or not of the group, is left alone."""
    found = await open_group(reads, service, event_type, error_class)
    ids = [str(letter["id"]) for letter in found.letters][:GROUP_LIMIT]
    if chosen is not None:
        wanted = {checked_letter_id(i) for i in chosen}
        ids = [i for i in ids if i in wanted]
    replayer = tools.replayer(api, found.service, dry_run=dry_run)
    return found, await replayer.group(ids)


TITLES = {"replayed": "Replayed", "would_replay": "Would be replayed",
          "forged": "Forged: refused and reported", "refused": "Not replayed"}
DRY_RUN_TITLES = {**TITLES, "forged": "Forged: a replay refuses it and reports it",
                  "refused": "Cannot be replayed"}


def summary(outcomes: Sequence[Replayed], *, dry_run: bool) -> Outcome:
    """The banner over the outcomes: done when every letter was (or would be) replayed."""
    titles = DRY_RUN_TITLES if dry_run else TITLES
    if not outcomes:
        return Outcome(False, 404, "Nothing to replay", "no open letter is left in the group")
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.outcome] = counts.get(o.outcome, 0) + 1
    said = "; ".join(f"{n}: {titles[k].lower()}" for k, n in sorted(counts.items()))
    done = set(counts) <= {"replayed", "would_replay"}
    status = 200 if done else 409
    if len(outcomes) == 1:
        only = outcomes[0]
        title = titles[only.outcome] + (" (dry run: nothing sent)" if dry_run else "")
        return Outcome(done, status, title, only.detail or said)
    return Outcome(done, status, "Dry run: nothing sent" if dry_run else "Group replayed",
                   said)

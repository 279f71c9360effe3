"""Replaying one service's dead letters, one or a group, as an operator's tool does it: each
letter read from the owning service's API (``GET /operator/dead-letters/{id}``: its state and
the letter), replayed by ``replay.replay_letter`` (which trusts only the broker), and what came
of it recorded through that API (``/forgeries``, ``/replays``), as the operator.

The tools differ in how they reach the API (``DeadLetterApi``: sagactl with a token of its own,
the console with the signed-in operator's) and where they take a group's letters from (each
its published view): the replay itself is this one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sagakit.operations.replay import ActionRecorder, Outcome, replay_letter
from sagakit.settings import KafkaClientSettings


class LetterUnavailable(Exception):
    """The service did not give the letter (it knows none by that id, or refused)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class DeadLetterApi(ActionRecorder, Protocol):
    """The owning service's ``/operator/dead-letters`` API, called as the operator."""

    async def letter(self, service: str, letter_id: str) -> Mapping[str, Any]:
        """The letter's state and the letter; ``LetterUnavailable`` when not given."""
        ...


@dataclass
class Replayer:
    """Replays letters of ``service``, signed with ``signing_key``, published with ``kafka``
    (the ``operator`` principal's settings); ``dry_run``: checks the same, sends nothing and
    records nothing."""

    service: str
    api: DeadLetterApi
    signing_key: Callable[[], Ed25519PrivateKey]
    kafka: KafkaClientSettings
    dry_run: bool = False

    async def one(self, letter_id: str, fixed_payload: dict[str, Any] | None = None,
                  *, only_open: bool = False) -> Outcome:
        try:
            kept = await self.api.letter(self.service, letter_id)
        except LetterUnavailable as exc:
            return Outcome(letter_id, self.service, "refused", exc.detail)
        return await replay_letter(
            letter_id, kept, self.service, kafka=self.kafka, signing_key=self.signing_key,
            recorder=self.api, dry_run=self.dry_run, fixed_payload=fixed_payload,
            only_open=only_open)

    async def group(self, letter_ids: Iterable[str]) -> list[Outcome]:
        """Each of ``letter_ids`` (a group's, in the order given) replayed or refused on its
        own; a letter acted on since it was listed is left alone."""
        return [await self.one(letter_id, only_open=True) for letter_id in letter_ids]

"""What the use cases need from the services, every call made with the operator's own token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class NotFound(Exception):
    """The service knows no such object."""


class SignInAgain(Exception):
    """The service refused the operator's token (401): expired or no longer trusted."""


class ServiceUnavailable(Exception):
    """The service did not answer, or answered with an error of its own (5xx)."""

    def __init__(self, service: str, reason: str) -> None:
        super().__init__(f"{service}: {reason}")
        self.service = service
        self.reason = reason


class SagaReads(Protocol):
    async def saga_status(self, saga_id: str) -> dict[str, Any]: ...

    async def saga_history(self, saga_id: str) -> list[dict[str, Any]]: ...

    async def order(self, order_id: str) -> dict[str, Any]: ...

    async def payments(self, saga_id: str) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Answer:
    """A service's answer to an operator's action: its status (2xx, 404, 409 or 422) and
    body; what the action made of it is the use case's to say."""

    status: int
    body: dict[str, Any]


class OperatorActions(Protocol):
    async def resolve_payment(self, payment_id: str, reference: str, note: str | None
                              ) -> Answer: ...

    async def archive_dead_letter(self, service: str, dead_letter_id: str, reason: str
                                  ) -> Answer: ...


class OverviewReads(Protocol):
    """The published views, summed up (``consola.adapters.read_views``)."""

    async def sagas_per_state(self, window_s: int) -> list[dict[str, Any]]: ...

    async def dead_letters_per_state(self) -> list[dict[str, Any]]: ...

    async def outbox_backlog(self) -> list[dict[str, Any]]: ...

    async def payments_needing_action_count(self) -> int: ...


class PaymentsNeedingActionReads(Protocol):
    async def payments_needing_action(self) -> list[dict[str, Any]]: ...


class DeadLetterReads(Protocol):
    async def open_dead_letters(self) -> list[dict[str, Any]]: ...


class SagaSearchReads(Protocol):
    async def search_sagas(self, *, saga_id: str | None, order_id: str | None,
                           customer_id: str | None, state: str | None,
                           older_than_s: int | None, stuck: bool, active: list[str],
                           limit: int) -> list[dict[str, Any]]: ...

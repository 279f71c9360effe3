"""What the use cases need from the services, every call made with the operator's own token."""

from __future__ import annotations

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

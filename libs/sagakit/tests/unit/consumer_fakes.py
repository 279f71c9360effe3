"""What the consumer's unit tests share: a unit of work that commits whatever it is given."""

from __future__ import annotations

from types import TracebackType
from typing import Any


class CommittingUnitOfWork:
    """Commits whatever it is given; remembers in ``opened`` (when given) the options it was
    opened with."""

    def __init__(self, opened: list[dict[str, Any]] | None = None, **options: Any) -> None:
        if opened is not None:
            opened.append(options)
        self.committed = self.ended = False

    async def __aenter__(self) -> CommittingUnitOfWork:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        return None

    def claim(self, *_: Any, **__: Any) -> None:
        return None

    async def commit(self) -> bool:
        self.committed = self.ended = True
        return True

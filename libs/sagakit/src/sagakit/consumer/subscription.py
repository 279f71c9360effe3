"""What a service handles: a typed declaration per event type, with what its handler asks of its
unit of work, written where the service is composed (its ``app.py``).

A subscription names its event type by its model (``Subscription(OrdenSolicitada, handler)``),
so the handler's signature says which model it gets (``Message[OrdenSolicitada]``) and mypy
checks the two agree."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, TypeVar

from saga_contracts import registry
from saga_contracts.events.base import Event
from sagakit.message import Message
from sagakit.store.unit_of_work import UnitOfWork

E = TypeVar("E", bound=Event)

Handler = Callable[[UnitOfWork, Message[E]], Awaitable[None]]
"""A handler of the events of model ``E``: ``Handler[OrdenSolicitada]``."""


@dataclass(frozen=True)
class Subscription(Generic[E]):
    """``handler`` handles every event of ``model``'s event type, in a unit of work of its own,
    the payload parsed into ``model``.

    - ``reads_outside_transaction``: the handler takes no lock; it reads without a transaction
      and writes everything with its commit statement, whose guard checks that what it read
      still holds (``sagakit.store.commit_statement``).
    - ``shares_transaction``: when a partition's records queue up, the handler's unit of work
      may share one transaction with other records' (``SharedTransaction``, ADR 0006). Only
      for a handler that reads outside a transaction, writes only with its commit statement,
      and leaves what must follow the commit to ``after_commit``.
    - ``isolation_level``: a stronger isolation level for the handler's transaction (sent
      with its BEGIN), for a handler that reads under locks and must not see a row change.
    """

    model: type[E]
    handler: Handler[E]
    reads_outside_transaction: bool = field(default=False, kw_only=True)
    shares_transaction: bool = field(default=False, kw_only=True)
    isolation_level: str | None = field(default=None, kw_only=True)

    @property
    def event_type(self) -> str:
        return self.model.event_type

    def __post_init__(self) -> None:
        if self.shares_transaction and (self.isolation_level
                                        or not self.reads_outside_transaction):
            raise ValueError(f"the {self.event_type} handler cannot share a transaction: only "
                             "one that reads outside a transaction can")

    @cached_property
    def unit_of_work_options(self) -> dict[str, Any]:
        """The unit-of-work factory's keywords for this handler: only what it asks for."""
        options: dict[str, Any] = {}
        if self.isolation_level is not None:
            options["isolation_level"] = self.isolation_level
        if self.reads_outside_transaction:
            options["reads_outside_transaction"] = True
        return options


def by_event_type(subscriptions: Sequence[Subscription[Any]]
                  ) -> dict[str, Subscription[Any]]:
    """The subscriptions keyed by event type; one per event type."""
    out: dict[str, Subscription[Any]] = {}
    for subscription in subscriptions:
        if subscription.event_type in out:
            raise ValueError(f"{subscription.event_type} is subscribed to twice")
        out[subscription.event_type] = subscription
    return out


def topics_of(subscriptions: Sequence[Subscription[Any]]) -> list[str]:
    """The topics the subscribed events are published on (their latest schema's), in the order
    of the subscriptions."""
    return list(dict.fromkeys(registry.latest(s.event_type).topic for s in subscriptions))

"""What the consumer's parts hand each other about a record: the record as read, the verdict on
it before anything is written, and the outcome of handling it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sagakit.consumer.subscription import Subscription
from sagakit.dead_letters import Attempt
from sagakit.envelope import Envelope
from sagakit.message import Message


@dataclass
class RawRecord:
    """What the consumer needs of a Kafka record; tests build these to drive its parts."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp: int = 0


@dataclass
class Outcome:
    status: str  # processed | duplicate | skipped | dead_lettered | retry
    attempts: list[Attempt] = field(default_factory=list)
    event_type: str | None = None
    retry_in_s: float | None = None


@dataclass(frozen=True)
class Admitted:
    """A record to handle: its envelope decoded, its payload valid and parsed into the model
    its subscription names."""

    message: Message[Any]
    subscription: Subscription[Any]
    traceparent: str | None
    tracestate: str | None = None

    @property
    def envelope(self) -> Envelope:
        return self.message.envelope

    @property
    def shares(self) -> bool:
        """Its handler may share a transaction with other records' (``shares_transaction``)."""
        return self.subscription.shares_transaction


@dataclass(frozen=True)
class Rejected:
    """A record to dead-letter at once, and why."""

    envelope: Envelope | None
    reason: str
    error: BaseException
    detail: str


Verdict = Admitted | Rejected | Outcome


@dataclass(frozen=True)
class RetryLater:
    """A partition rewound to ``from_offset``, to be fetched again after ``delay_s``."""

    delay_s: float
    from_offset: int

"""Dead letters: the one format in which a service parks a message for an operator.

The consumer loop writes one for a record it gives up on, and a service writes one for work it gives
up on that a message asked for (pagos, a charge the gateway never answered). Both go through the
outbox to the service's dead-letter topic, and ``sagactl`` lists and replays both from it. The
letter's value (docs/standard.md#failures-retries-and-dead-letters: the complete original, every
attempt with its time and error, the last error's trace):

    {"dead_lettered_at", "consumer_service", "reason", "error_class", "attempt_count",
     "attempts": [{"attempt", "at", "error"}, ...], "last_traceback",
     "original": {"topic", "partition", "offset", "timestamp", "key", "headers",
                  "value": {"encoding": "utf-8" | "base64", "data"},
                  "message_id", "event_type"[, "raw"][, "rebuilt"]}}

and its headers are the original's (those that are text) and the ``X-DLQ-*`` headers.

PostgreSQL keeps the letter in a ``jsonb`` column, which refuses the NUL character, and its
text columns refuse it too. So the original is kept as text only where it is UTF-8 without a
NUL; otherwise as bytes: a value in base64 (``value.encoding``), and a key or headers that are
not such text in ``original.raw`` (base64, every header with its name) besides what of them is.
The other texts of the letter (errors, trace) have any NUL or lone surrogate written out as
its escape, and whatever in them looks like a payment token masked (an error may quote what it
refused; the original keeps its token sealed, as it came, which is all a replay needs). A letter
built with ``as_bytes`` keeps the whole original as bytes: what is left when even a letter
built from text could not be written.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from saga_contracts import headers as h
from saga_contracts.redaction import scrub
from saga_contracts.topics import dead_letter_topic
from sagakit.envelope import utc_now_iso

if TYPE_CHECKING:
    from sagakit.store.unit_of_work import UnitOfWork

# The longest trace kept: its end, where the error was raised.
TRACEBACK_CHARS = 8000


@dataclass
class Attempt:
    """One try at a message and how it failed."""

    number: int
    at: str
    error: str


@dataclass(frozen=True)
class Original:
    """The message a dead letter parks: as the record was read, or, for work that a message
    asked for and that failed later, as that message is rebuilt (no partition nor offset)."""

    topic: str
    value: bytes | None
    message_id: str
    event_type: str
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes]] = ()
    partition: int | None = None
    offset: int | None = None
    timestamp: int | None = None


@dataclass(frozen=True)
class DeadLetter:
    """A letter ready for the outbox: ``emit`` queues it on a unit of work."""

    topic: str
    key: str
    event_type: str
    value: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    def emit(self, uow: UnitOfWork) -> None:
        uow.emit_raw(topic=self.topic, key=self.key, event_type=self.event_type,
                     value=self.value, headers=self.headers)


def storable(text: str) -> bool:
    """Whether PostgreSQL keeps ``text`` as it is (a ``text`` or ``jsonb`` value): UTF-8 (no
    lone surrogate, which an exception's message may carry) without a NUL."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def as_text(data: bytes | None) -> str | None:
    """``data`` as text PostgreSQL keeps, or None when it is not (not UTF-8, or with a NUL)."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if storable(text) else None


def scrubbed(text: str) -> str:
    """Free text (an error message, a trace) that PostgreSQL keeps: a NUL or a lone surrogate
    written out as its escape."""
    if storable(text):
        return text
    return (text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace")
            .decode("utf-8"))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def build(*, service: str, reason: str, error_class: str, attempts: Sequence[Attempt],
          last_traceback: str, original: Original, saga_id: str | None,
          as_bytes: bool = False, rebuilt: bool = False) -> DeadLetter:
    """The dead letter of ``original``, for ``service``'s dead-letter topic, keyed by the saga
    (or the original's key, or its message id). ``as_bytes``: the original as bytes only.
    ``rebuilt``: the original is the message rebuilt from what the service kept, not the record
    as read (its partition and offset, when known, say where that record sits)."""
    value_text = None if as_bytes else as_text(original.value)
    key_text = None if as_bytes else as_text(original.key)
    text_headers: dict[str, str] = {}
    headers_are_text = not as_bytes
    for name, raw_value in original.headers:
        text = None if as_bytes else as_text(raw_value if raw_value is not None else b"")
        if text is None or not storable(name):
            headers_are_text = False
        else:
            text_headers[name] = text
    parked: dict[str, Any] = {
        "topic": scrubbed(original.topic),
        "partition": original.partition,
        "offset": original.offset,
        "timestamp": original.timestamp,
        "key": key_text,
        "headers": text_headers,
        "value": ({"encoding": "utf-8", "data": value_text} if value_text is not None else
                  {"encoding": "base64", "data": _b64(original.value or b"")}),
        "message_id": scrubbed(original.message_id),
        "event_type": scrubbed(original.event_type),
    }
    if rebuilt:
        parked["rebuilt"] = True
    key_is_text = original.key is None or key_text is not None
    if not (key_is_text and headers_are_text):
        parked["raw"] = {
            "key": None if original.key is None else _b64(original.key),
            "headers": [{"name": _b64(name.encode("utf-8", "surrogatepass")),
                         "value": _b64(raw_value or b"")}
                        for name, raw_value in original.headers],
        }
    record = {
        "dead_lettered_at": utc_now_iso(),
        "consumer_service": service,
        "reason": reason,
        "error_class": scrubbed(error_class),
        "attempt_count": len(attempts),
        "attempts": [{"attempt": a.number, "at": a.at, "error": scrubbed(scrub(a.error))}
                     for a in attempts],
        "last_traceback": scrubbed(scrub(last_traceback[-TRACEBACK_CHARS:])),
        "original": parked,
    }
    headers = {**text_headers,
               h.DLQ_ORIGINAL_TOPIC: parked["topic"],
               h.DLQ_ATTEMPTS: str(len(attempts)),
               h.DLQ_ERROR_CLASS: reason}
    if original.partition is not None:
        headers[h.DLQ_ORIGINAL_PARTITION] = str(original.partition)
    if original.offset is not None:
        headers[h.DLQ_ORIGINAL_OFFSET] = str(original.offset)
    key = (saga_id if saga_id and storable(saga_id) else None) or key_text or parked["message_id"]
    return DeadLetter(dead_letter_topic(service), key, parked["event_type"], record, headers)

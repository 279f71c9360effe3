"""The one dead-letter format: what PostgreSQL cannot keep as text is parked as bytes, and a
letter the database refuses never stops the consumer."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from sagakit import dead_letters, jsonio
from sagakit.consumer import EventConsumer, RawRecord
from sagakit.consumer.retry_policy import InfrastructureDown
from sagakit.dead_letters import Attempt, Original
from sagakit.settings import MessagingSettings


def _everything_storable(letter: dead_letters.DeadLetter) -> bool:
    """What the unit of work writes (orjson refuses a lone surrogate) and jsonb keeps (no
    NUL)."""
    text = jsonio.dumps([letter.value, letter.headers, letter.key, letter.event_type])
    return "\\u0000" not in text


def test_a_record_that_is_text_is_kept_as_text() -> None:
    letter = dead_letters.build(
        service="s", reason="permanent", error_class="ValueError",
        attempts=[Attempt(1, "t", "boom")], last_traceback="Traceback",
        original=Original("order-events", b'{"a": 1}', "m-1", "OrdenSolicitada", key=b"k",
                          headers=[("X-Saga-ID", b"s-1")], partition=2, offset=7),
        saga_id="s-1")
    original = letter.value["original"]
    assert original["value"] == {"encoding": "utf-8", "data": '{"a": 1}'}
    assert original["key"] == "k" and original["headers"] == {"X-Saga-ID": "s-1"}
    assert "raw" not in original
    assert letter.topic == "s-dlq" and letter.key == "s-1"
    assert letter.headers["X-DLQ-Original-Offset"] == "7"
    assert letter.headers["X-Saga-ID"] == "s-1"


def test_errors_and_trace_mask_tokens_and_the_original_keeps_its_sealed_token() -> None:
    """An error may quote what it refused; the original stays as it came, to be replayed."""
    original_value = b'{"payment_method": {"token": "sealed:v2:k1:AAAA"}}'
    letter = dead_letters.build(
        service="s", reason="permanent", error_class="ValueError",
        attempts=[Attempt(1, "t", "refused 'tok_visa_1'"), Attempt(2, "t", "sealed:v2:k1:BBBB")],
        last_traceback="Traceback\nValueError: source tok_visa_2",
        original=Original("order-events", original_value, "m-1", "OrdenSolicitada", key=b"k"),
        saga_id="s-1")
    assert [a["error"] for a in letter.value["attempts"]] == ["refused '[MASKED]'", "[MASKED]"]
    assert letter.value["last_traceback"] == "Traceback\nValueError: source [MASKED]"
    assert letter.value["original"]["value"]["data"] == original_value.decode()


def test_a_record_with_a_nul_byte_is_parked_as_bytes_with_its_headers() -> None:
    headers = [("X-Saga-ID", b"s-\x00"), ("X-Ok", b"fine"), ("X-\x00", b"v"), ("X-Bin", b"\xff")]
    letter = dead_letters.build(
        service="s", reason="undecodable", error_class="UndecodableMessage",
        attempts=[Attempt(1, "t", "value \x00 is not JSON")], last_traceback="at \ud800",
        original=Original("order-events", b"\x00abc", "m-\x00", "E\x00", key=b"\x00k",
                          headers=headers),
        saga_id="s-\x00")
    assert _everything_storable(letter)
    original = letter.value["original"]
    assert base64.b64decode(original["value"]["data"]) == b"\x00abc"
    assert original["value"]["encoding"] == "base64"
    assert original["key"] is None
    assert base64.b64decode(original["raw"]["key"]) == b"\x00k"
    assert original["headers"] == {"X-Ok": "fine"}
    assert [(base64.b64decode(x["name"]), base64.b64decode(x["value"]))
            for x in original["raw"]["headers"]] == [(k.encode(), v) for k, v in headers]
    assert letter.value["attempts"][0]["error"] == "value \\x00 is not JSON"


def test_a_letter_as_bytes_keeps_nothing_of_the_record_as_text() -> None:
    letter = dead_letters.build(
        service="s", reason="permanent", error_class="E", attempts=[], last_traceback="",
        original=Original("t", b'{"a": 1}', "m", "E", key=b"k", headers=[("H", b"v")]),
        saga_id=None, as_bytes=True)
    original = letter.value["original"]
    assert original["value"]["encoding"] == "base64" and original["key"] is None
    assert original["headers"] == {} and original["raw"]["headers"]
    assert letter.key == "m"


class _Refused(Exception):
    """A database error that is nobody's transient trouble (as jsonb refusing a NUL is)."""

    sqlstate = "22P05"


class _UnitOfWork:
    """Records the letters written; refuses the first ``refusals`` commits."""

    def __init__(self, log: list[dict[str, Any]], refusals: list[bool]) -> None:
        self.log, self.refusals = log, refusals
        self.letter: dict[str, Any] | None = None

    async def __aenter__(self) -> _UnitOfWork:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def claim(self, *args: Any, **kwargs: Any) -> None:
        return None

    def emit_raw(self, **row: Any) -> None:
        self.letter = row

    async def commit(self) -> None:
        if self.refusals and self.refusals.pop(0):
            raise _Refused("unsupported Unicode escape sequence")
        assert self.letter is not None
        self.log.append(self.letter)


def _consumer(written: list[dict[str, Any]], refusals: list[bool]) -> EventConsumer:
    return EventConsumer(service="s", topics=["order-events"], subscriptions=[],
                         uow_factory=lambda **_: _UnitOfWork(written, refusals),
                         settings=MessagingSettings())


async def test_a_letter_the_database_refuses_is_written_again_as_bytes() -> None:
    """Regression: the refusal was raised out of the lane, and the consumer restarted onto the
    same record for ever."""
    written: list[dict[str, Any]] = []
    consumer = _consumer(written, [True, False])
    record = RawRecord("order-events", 0, 5, b"k", b"not json", [("X-Event-Type", b"E")])
    outcome = await consumer.processor.process(record)
    assert outcome.status == "dead_lettered"
    [letter] = written
    original = letter["value"]["original"]
    assert base64.b64decode(original["value"]["data"]) == b"not json"
    assert base64.b64decode(original["raw"]["key"]) == b"k"
    assert letter["event_type"] == "E"


async def test_a_letter_refused_even_as_bytes_is_waited_out_not_raised() -> None:
    """Refused whatever it holds, the letter is refused for the database's own reasons: the
    lane waits as for a database that is away (``InfrastructureDown``), never restarting the
    consumer onto the same record."""
    consumer = _consumer([], [True, True])
    with pytest.raises(InfrastructureDown):
        await consumer.processor.process(RawRecord("order-events", 0, 5, None, b"not json", []))

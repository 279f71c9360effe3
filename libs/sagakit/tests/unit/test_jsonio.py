"""JSON on the per-message paths (sagakit.jsonio): what it accepts, and what a log line
survives."""

from __future__ import annotations

import json
import logging
import uuid
from decimal import Decimal

import pytest

from sagakit import jsonio
from sagakit.envelope import Envelope, UndecodableMessage


def _envelope_value(payload: str) -> bytes:
    return (
        f'{{"message_id":"{uuid.uuid4()}","saga_id":"{uuid.uuid4()}","span_id":"a",'
        '"schema_version":"1.0","timestamp":"2026-12-01T00:00:00+00:00",'
        f'"source_service":"inventario","event_type":"StockVerificado","payload":{payload}}}'
    ).encode()


def test_an_envelope_written_reads_back_the_same_and_as_the_standard_library_reads_it() -> None:
    value = _envelope_value('{"items":[{"sku":"Ñandú-1","quantity":2}],"total":"19.99"}')
    envelope = Envelope.from_record_value(value)
    assert envelope.payload == {"items": [{"sku": "Ñandú-1", "quantity": 2}], "total": "19.99"}
    written = jsonio.dumpb(envelope.to_dict())
    assert Envelope.from_record_value(written) == envelope
    assert json.loads(written) == {**json.loads(value), "parent_span_id": None, "metadata": {}}
    assert "Ñandú".encode() in written, "UTF-8, not escapes"


@pytest.mark.parametrize("payload, why", [
    ('{"amount": NaN}', "NaN is not JSON"),
    ('{"sku": "\xff"}', "not UTF-8"),
])
def test_what_is_not_strict_json_is_undecodable(payload: str, why: str) -> None:
    value = _envelope_value("{}").replace(b'"payload":{}', b'"payload":'
                                          + payload.encode("latin-1"))
    with pytest.raises(UndecodableMessage):
        Envelope.from_record_value(value)


def test_a_decode_error_is_the_standard_librarys() -> None:
    with pytest.raises(json.JSONDecodeError):
        jsonio.loads(b"{")


def test_a_log_line_renders_what_json_cannot() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    line = jsonio.dumps_for_log({"amount": Decimal("1.10"), 3: "int key", "x": Opaque(),
                                 "level": logging.getLevelName(20)})
    assert json.loads(line) == {"amount": "Decimal('1.10')", "3": "int key", "x": "<opaque>",
                                "level": "INFO"}


def test_money_is_never_written_as_a_float() -> None:
    with pytest.raises(TypeError):
        jsonio.dumps({"amount": Decimal("1.10")})

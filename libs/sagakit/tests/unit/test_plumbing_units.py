"""Units of the plumbing that need neither PostgreSQL nor Kafka."""

from __future__ import annotations

import json
import logging
import random
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy.exc import DBAPIError, OperationalError

from sagakit.backoff import Backoff
from sagakit.consumer.retry_policy import classify
from sagakit.envelope import Envelope, UndecodableMessage
from sagakit.errors import PermanentError, TransientError
from sagakit.observability.privacy import MASK, redact
from sagakit.settings import InvalidConfiguration, MessagingSettings, load


def test_backoff_follows_the_standard_progression_with_bounded_jitter() -> None:
    b = Backoff(0.5, 2.0, 60.0, jitter=0.2)
    assert [b.nominal(k) for k in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert b.nominal(20) == 60.0
    rng = random.Random(1)
    delays = [b.delay(3, rng) for _ in range(200)]
    assert min(delays) >= 2.0 * 0.8 and max(delays) <= 2.0 * 1.2
    assert len({round(d, 6) for d in delays}) > 100, "jitter spreads retries"


def test_envelope_round_trip_and_headers() -> None:
    env = Envelope.new(saga_id=str(uuid.uuid4()), event_type="OrdenCompletada",
                       schema_version="1.0.0", source_service="pedidos",
                       payload={"x": 1}, parent_span_id="p-1")
    back = Envelope.from_record_value(json.dumps(env.to_dict()).encode())
    assert back == env
    headers = env.kafka_headers("00-abc-def-01")
    assert headers["X-Saga-ID"] == env.saga_id and headers["X-Parent-Span-ID"] == "p-1"
    assert headers["X-Span-ID"] == env.span_id and headers["traceparent"] == "00-abc-def-01"
    assert env.timestamp.endswith("Z")


def test_message_ids_are_ordered_by_creation_time_and_saga_ids_stay_random() -> None:
    """Inbox and outbox index message ids: time-ordered ids keep their inserts on the last
    pages of those indexes, instead of scattering them over every page. Saga ids are the
    caller's, version 4 as the standard requires."""
    saga_id = str(uuid.uuid4())
    ids = [Envelope.new(saga_id=saga_id, event_type="OrdenCompletada", schema_version="1.0.0",
                        source_service="pedidos", payload={}).message_id for _ in range(2000)]
    assert all(uuid.UUID(i).version == 7 for i in ids)
    assert len(set(ids)) == len(ids)
    # Ordered as text too: processed_messages keys them as text.
    assert ids == sorted(ids) == sorted(ids, key=lambda i: uuid.UUID(i).int)
    env = Envelope.new(saga_id=saga_id, event_type="OrdenCompletada", schema_version="1.0.0",
                       source_service="pedidos", payload={})
    assert env.saga_id == saga_id and uuid.UUID(env.saga_id).version == 4


@pytest.mark.parametrize("raw", [b"\xff\x00", b"[1, 2]", b'{"event_type": "X"}', None,
                                 b'{"message_id": "no", "saga_id": "no", "span_id": "s", '
                                 b'"schema_version": "1.0.0", "timestamp": "t", '
                                 b'"source_service": "x", "event_type": "E", "payload": {}}'])
def test_what_is_not_an_envelope_is_undecodable(raw: bytes | None) -> None:
    with pytest.raises(UndecodableMessage):
        Envelope.from_record_value(raw)


def test_errors_are_classified() -> None:
    assert classify(TransientError()) == "transient"
    assert classify(PermanentError()) == "permanent"
    assert classify(KeyError("bug")) == "permanent"
    assert classify(ConnectionRefusedError()) == "infrastructure"
    assert classify(OperationalError("SELECT 1", {}, Exception("down"))) == "infrastructure"


class _PgError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.sqlstate = code


@pytest.mark.parametrize("code", ["57P03", "57P01", "57P02", "08006", "08001"])
def test_a_server_starting_or_going_away_is_infrastructure_not_a_poison_message(code: str) -> None:
    """Regression (make chaos): "the database system is not yet accepting connections" (57P03)
    came as a plain DBAPIError and was classified permanent, i.e. a dead letter."""
    assert classify(DBAPIError("connect", {}, _PgError(code))) == "infrastructure"


def test_a_failing_statement_is_still_permanent() -> None:
    assert classify(DBAPIError("INSERT", {}, _PgError("23505"))) == "permanent"
    assert classify(DBAPIError("SELECT", {}, _PgError("40001"))) == "transient"


def test_declared_sensitive_fields_are_masked_or_omitted_at_any_depth() -> None:
    event = {"payload": {"payment_method": {"type": "credit_card", "token": "tok_visa"},
                         "shipping_address": {"street": "Calle 1"}, "items": [{"sku": "A"}]}}
    out = redact(event)
    assert out["payload"]["payment_method"] == {"type": "credit_card", "token": MASK}
    assert "shipping_address" not in out["payload"]
    assert out["payload"]["items"] == [{"sku": "A"}]
    assert event["payload"]["payment_method"]["token"] == "tok_visa", "the input is not changed"
    # Inside lists and tuples of containers too; an absent value stays visibly absent.
    nested = redact({"tries": [{"payment_method": {"token": "t1"}}, ({"token": "t2"},)],
                     "token": None, "duration_ms": 1.5})
    assert nested == {"tries": [{"payment_method": {"token": MASK}}, [{"token": MASK}]],
                      "token": None, "duration_ms": 1.5}


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_structured_logs_never_show_a_token(capsys: pytest.CaptureFixture[str],
                                            restore_logging: None) -> None:
    from sagakit.observability.structured_logging import configure

    configure("test")
    logging.getLogger("t").info("payload", extra={"saga_id": "s-1", "event_type": "E",
                                                  "payload": {"payment_method": {
                                                      "token": "tok_secret_123"}}})
    line = capsys.readouterr().out.strip().splitlines()[-1]
    doc = json.loads(line)
    assert "tok_secret_123" not in line
    assert doc["service"] == "test" and doc["saga_id"] == "s-1" and doc["level"] == "info"
    assert doc["timestamp"].endswith("Z")
    for field in ("event_type", "schema_version", "span_id", "parent_span_id", "status",
                  "duration_ms", "attempt"):
        assert field in doc


def test_token_shaped_text_is_masked_in_messages_exceptions_and_values(
        capsys: pytest.CaptureFixture[str], restore_logging: None) -> None:
    """No declaration reaches a token quoted in a message, an exception's text or a value of
    any name: its shape does, in the clear (``tok_…``) or sealed (``sealed:v2:…``)."""
    from saga_contracts import sealing
    from sagakit.observability.structured_logging import configure

    sealed = sealing.parse_sealing_key(sealing.new_key_pair("k1")[1]).seal(
        "tok_in_the_clear", sealing.Binding(
            saga_id="9b1f4c1e-8f57-4a43-9d6a-0b1b8c9f3e11",
            order_id="9b1f4c1e-8f57-4a43-9d6a-0b1b8c9f3e11", customer_id="c-1",
            currency="USD", amount_minor=100))
    configure("test")
    try:
        raise ValueError("gateway refused source tok_in_an_exception")
    except ValueError:
        logging.getLogger("t").exception("charge with %s failed", "tok_in_the_message",
                                         extra={"saga_id": "s-1", "detail": sealed,
                                                "attempts": [{"note": "tok_nested_deep"}]})
    line = capsys.readouterr().out.strip().splitlines()[-1]
    doc = json.loads(line)
    for secret in ("tok_in_the_message", "tok_in_an_exception", "tok_nested_deep", sealed,
                   sealed.rsplit(":", 1)[1], "tok_"):
        assert secret not in line, secret
    assert doc["event"] == f"charge with {MASK} failed"
    assert doc["detail"] == MASK and doc["attempts"] == [{"note": MASK}]
    assert doc["exception"].endswith(f"ValueError: gateway refused source {MASK}")


def test_a_log_line_is_one_json_object_with_its_exception_and_no_saga_keys_when_unsagaed(
        capsys: pytest.CaptureFixture[str], restore_logging: None) -> None:
    from sagakit.observability.structured_logging import configure

    configure("test")
    try:
        raise ValueError("bad value")
    except ValueError:
        logging.getLogger("t").exception("failed %s of %d", "step", 3,
                                         extra={"detail": {"shipping_address": {"street": "Main St 1"}}})
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    doc = json.loads(lines[0])
    assert doc["event"] == "failed step of 3" and doc["level"] == "error"
    assert doc["logger"] == "t" and doc["service"] == "test"
    assert "ValueError: bad value" in doc["exception"]
    assert "saga_id" not in doc and "attempt" not in doc
    assert "Main St 1" not in lines[0]


def test_limits_below_the_standard_stop_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGA_RETRY_MAX_ATTEMPTS", "2")
    with pytest.raises(InvalidConfiguration) as err:
        load(MessagingSettings)
    assert "SAGA_RETRY_MAX_ATTEMPTS" in str(err.value)


def test_relay_interval_above_one_second_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGA_RELAY_POLL_INTERVAL_S", "1.5")
    with pytest.raises(InvalidConfiguration) as err:
        load(MessagingSettings)
    assert "SAGA_RELAY_POLL_INTERVAL_S" in str(err.value)


def test_unsafe_limits_need_the_explicit_override(monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("SAGA_RETRY_MAX_BACKOFF_S", "1")
    monkeypatch.setenv("SAGA_ALLOW_UNSAFE_LIMITS", "1")
    with caplog.at_level(logging.WARNING):
        settings = load(MessagingSettings)
    assert settings.retry_max_backoff_s == 1
    assert "SAGA_RETRY_MAX_BACKOFF_S" in caplog.text

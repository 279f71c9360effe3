"""A bearer token never reaches a log line: not as a field named for it, not quoted in a message
or an exception's text."""

from __future__ import annotations

import json
import logging

from sagakit.observability.privacy import MASK, scrub
from sagakit.observability.structured_logging import JsonLineFormatter

JWT = ("eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJjdXN0LTEiLCJyb2xlcyI6WyJvcGVyYXRvciJdfQ"
       ".c2lnbmF0dXJlLWJ5dGVz")


def _line(message: str, *args: object, **extra: object) -> str:
    record = logging.LogRecord("test", logging.INFO, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    return JsonLineFormatter("test").format(record)


def test_a_jwt_quoted_in_a_message_is_masked() -> None:
    line = _line("refused %s for %s", JWT, "cust-1")
    assert JWT not in line and "eyJ" not in line
    assert json.loads(line)["event"] == f"refused {MASK} for cust-1"


def test_an_authorization_field_is_masked_wherever_it_sits() -> None:
    line = _line("request", request={"headers": {"Authorization": f"Bearer {JWT}"}},
                 authorization="Bearer opaque-credential-123", access_token=JWT)
    parsed = json.loads(line)
    assert parsed["request"]["headers"]["Authorization"] == MASK
    assert parsed["authorization"] == MASK and parsed["access_token"] == MASK
    assert "opaque-credential-123" not in line


def test_what_follows_bearer_in_free_text_is_masked() -> None:
    assert scrub("upstream said: Authorization: Bearer abc.def-123 was refused") == (
        f"upstream said: Authorization: Bearer {MASK} was refused")


def test_text_without_a_credential_is_left_as_it_is() -> None:
    text = "order accepted for customer cust-1, they eyJoyed it"
    assert scrub(text) == text

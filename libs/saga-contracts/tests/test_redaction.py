"""What is never shown: fields the schemas declare sensitive, and token-shaped text anywhere."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga_contracts import sealing
from saga_contracts.redaction import MASK, redact, schema_declarations, scrub

ORDER = "9b1f4c1e-8f57-4a43-9d6a-0b1b8c9f3e11"
SEALED = sealing.parse_sealing_key(sealing.new_key_pair("k1")[1]).seal("tok_visa", sealing.Binding(
    saga_id=ORDER, order_id=ORDER, customer_id="c-1", currency="USD", amount_minor=100))


@pytest.mark.parametrize(("text", "expected"), [
    ("charge failed for tok_visa_123", f"charge failed for {MASK}"),
    ("ValueError: bad source 'tok_chargeDeclined'", f"ValueError: bad source '{MASK}'"),
    ('{"source": "tok_live-4242_x"}', f'{{"source": "{MASK}"}}'),
    ("line one\\ntok_visa after an escaped new line", f"line one\\n{MASK} after an escaped new line"),
    (f"token {SEALED} in text", f"token {MASK} in text"),
    (f"cut short: {SEALED[:40]}", f"cut short: {MASK}"),
    ("sealed:v2:k1:", MASK),
    ("an old dead letter's sealed:v1:k1:AAAA", f"an old dead letter's {MASK}"),
    ("two: tok_a and tok_b", f"two: {MASK} and {MASK}"),
])
def test_token_shaped_text_is_masked(text: str, expected: str) -> None:
    assert scrub(text) == expected


@pytest.mark.parametrize("text", ["card_declined: Your card was declined.", "tokens", "tok",
                                  "stock_check", "sealed", "sealed: v2", "sealed:v:", ""])
def test_text_without_a_token_is_left_as_it_is(text: str) -> None:
    assert scrub(text) == text


def test_a_sealed_token_whose_base64_holds_tok_is_masked_whole() -> None:
    text = "sealed:v2:k1:AAAAtok_visaBBBB rest"
    assert scrub(text) == f"{MASK} rest"


def test_a_json_line_stays_json_once_scrubbed() -> None:
    line = json.dumps({"event": "x", "exception": "Traceback\n  ValueError: tok_visa",
                       "nested": {"detail": [f"{SEALED}"]}})
    doc = json.loads(scrub(line))
    assert doc["exception"] == f"Traceback\n  ValueError: {MASK}"
    assert doc["nested"]["detail"] == [MASK]


def test_the_schemas_declare_the_token_and_the_address() -> None:
    assert schema_declarations() == {"token": "mask", "shipping_address": "omit"}


def test_declared_fields_are_masked_or_omitted_at_any_depth() -> None:
    value: dict[str, Any] = {"payload": {"payment_method": {"type": "credit_card",
                                                           "token": SEALED},
                                         "shipping_address": {"street": "s"},
                                         "items": [{"sku": "A"}]}}
    assert redact(value) == {"payload": {"payment_method": {"type": "credit_card", "token": MASK},
                                         "items": [{"sku": "A"}]}}
    assert value["payload"]["payment_method"]["token"] == SEALED, "the input is not changed"

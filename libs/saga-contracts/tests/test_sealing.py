"""The payment token sealed for pagos: only the holder of the private key opens it, only for the
charge it was sealed for (saga, order, customer, currency, amount, key id); a changed
ciphertext, another key or an unknown key id never opens; keys rotate by key id; the sealed
form is what the schemas accept, and never the token."""

from __future__ import annotations

import base64
import dataclasses
import json
from decimal import Decimal

import pytest

from saga_contracts import minor_units, registry, sealing
from saga_contracts.sealing import (
    Binding,
    CannotOpen,
    InvalidKey,
    NotSealed,
    UnknownKeyId,
    parse_opening_keys,
    parse_sealing_key,
)

ORDER = "9b1f4c1e-8f57-4a43-9d6a-0b1b8c9f3e11"
OTHER_ORDER = "0c2e7a9d-1111-4a43-9d6a-0b1b8c9f3e11"
SAGA = "5d8e2f40-3c1b-4e6a-8f2d-7a9b0c1d2e3f"
TOKEN = "tok_visa_5f3a9c"
CHARGE = Binding.of(saga_id=SAGA, order_id=ORDER, customer_id="cust-42",
                    amount=Decimal("25.50"), currency="USD")


def _pair(key_id: str) -> tuple[sealing.OpeningKeys, sealing.SealingKey]:
    private, public = sealing.new_key_pair(key_id)
    return parse_opening_keys(private), parse_sealing_key(public)


def test_a_sealed_token_opens_with_the_private_key_for_its_charge() -> None:
    keys, key = _pair("k1")
    sealed = key.seal(TOKEN, CHARGE)
    assert sealed.startswith("sealed:v2:k1:") and TOKEN not in sealed
    assert sealing.is_sealed(sealed) and sealing.key_id_of(sealed) == "k1"
    assert keys.open(sealed, CHARGE) == TOKEN


def test_ids_and_currency_in_either_case_and_the_amount_in_any_scale_are_one_charge() -> None:
    keys, key = _pair("k1")
    sealed = key.seal(TOKEN, CHARGE)
    same = Binding.of(saga_id=SAGA.upper(), order_id=ORDER.upper(), customer_id="cust-42",
                      amount=Decimal("25.5"), currency="usd")
    assert keys.open(sealed, same) == TOKEN
    assert CHARGE.amount_minor == 2550


# Each a charge that is not CHARGE in one value only: a token sealed for CHARGE copied into an
# event for it (a forged StockVerificado) must not open.
OTHER_CHARGES = {
    "another saga": dataclasses.replace(CHARGE, saga_id="0f0e0d0c-0b0a-4909-8807-060504030201"),
    "another order": dataclasses.replace(CHARGE, order_id=OTHER_ORDER),
    "another customer": dataclasses.replace(CHARGE, customer_id="cust-43"),
    "a customer in another case": dataclasses.replace(CHARGE, customer_id="CUST-42"),
    "no customer": dataclasses.replace(CHARGE, customer_id=""),
    "another amount": dataclasses.replace(CHARGE, amount_minor=2551),
    "a tenth of the amount": dataclasses.replace(CHARGE, amount_minor=255),
    "another currency": dataclasses.replace(CHARGE, currency="EUR"),
}


@pytest.mark.parametrize("other", OTHER_CHARGES.values(), ids=OTHER_CHARGES.keys())
def test_a_token_sealed_for_another_charge_does_not_open(other: Binding) -> None:
    keys, key = _pair("k1")
    with pytest.raises(CannotOpen, match="does not open for this charge"):
        keys.open(key.seal(TOKEN, CHARGE), other)
    with pytest.raises(CannotOpen):
        keys.open(key.seal(TOKEN, other), CHARGE)


def test_the_binding_is_canonical_json_so_no_two_charges_share_an_encoding() -> None:
    """Values that would run into each other if joined (a customer id that holds what follows
    it) stay apart: each is a JSON string or integer under its own key."""
    info = json.loads(CHARGE.info("k1"))
    assert info == {"purpose": "saga-payment-token", "version": 2, "key_id": "k1",
                    "saga_id": SAGA, "order_id": ORDER, "customer_id": "cust-42",
                    "currency": "USD", "amount_minor": 2550}
    tricky = dataclasses.replace(CHARGE, customer_id='cust-42","currency":"EUR')
    assert tricky.info("k1") != dataclasses.replace(CHARGE, currency="EUR").info("k1")
    assert CHARGE.info("k1") == CHARGE.info("k1")


def test_an_amount_its_currency_cannot_hold_has_no_binding() -> None:
    with pytest.raises(minor_units.TooManyDecimals):
        Binding.of(saga_id=SAGA, order_id=ORDER, customer_id="c", amount=Decimal("10.5"),
                   currency="CLP")
    assert Binding.of(saga_id=SAGA, order_id=ORDER, customer_id="c", amount=Decimal("1000.00"),
                      currency="CLP").amount_minor == 1000


def test_each_seal_of_the_same_token_differs() -> None:
    _, key = _pair("k1")
    assert key.seal(TOKEN, CHARGE) != key.seal(TOKEN, CHARGE)


def test_a_sealed_token_is_what_the_schemas_accept() -> None:
    _, key = _pair("k1")
    for token in ("t", TOKEN, "x" * 255, "ñ" * 255):
        payment_method = {"type": "credit_card", "token": key.seal(token, CHARGE)}
        registry.validate("StockVerificado", registry.latest("StockVerificado").version, {
            "order_id": ORDER, "items": [{"sku": "A", "quantity": 1, "unit_price": "1.00"}],
            "total_amount": "1.00", "currency": "USD", "payment_method": payment_method})


def test_the_wrong_private_key_does_not_open_it() -> None:
    _, key = _pair("k1")
    impostor, _ = _pair("k1")  # another key pair under the same key id
    with pytest.raises(CannotOpen):
        impostor.open(key.seal(TOKEN, CHARGE), CHARGE)


def _flip(sealed: str, position: int) -> str:
    prefix, body = sealed.rsplit(":", 1)
    raw = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    raw[position] ^= 0x01
    return f"{prefix}:{base64.urlsafe_b64encode(bytes(raw)).rstrip(b'=').decode()}"


@pytest.mark.parametrize("position", [0, 31, 32, 40, -1])
def test_a_changed_ciphertext_does_not_open(position: int) -> None:
    """Any bit changed, in the ephemeral key, the sealed token or its tag."""
    keys, key = _pair("k1")
    with pytest.raises(CannotOpen):
        keys.open(_flip(key.seal(TOKEN, CHARGE), position), CHARGE)


def test_a_cut_ciphertext_does_not_open() -> None:
    keys, key = _pair("k1")
    sealed = key.seal(TOKEN, CHARGE)
    for cut in (sealed[:-4], sealed[:-30], sealed.rsplit(":", 1)[0] + ":AAAA"):
        with pytest.raises(CannotOpen):
            keys.open(cut, CHARGE)


def test_a_relabelled_key_id_does_not_open() -> None:
    """The key id is bound into the ciphertext: the same key known under two ids opens only
    what was sealed under the id it names."""
    private, public = sealing.new_key_pair("k1")
    both = parse_opening_keys(f"{private},{private.replace('k1:', 'k2:')}")
    sealed = parse_sealing_key(public).seal(TOKEN, CHARGE)
    with pytest.raises(CannotOpen):
        both.open(sealed.replace(":k1:", ":k2:"), CHARGE)


def test_an_unknown_key_id_is_named_and_the_token_is_not() -> None:
    keys, _ = _pair("k1")
    _, other = _pair("k9")
    with pytest.raises(UnknownKeyId) as err:
        keys.open(other.seal(TOKEN, CHARGE), CHARGE)
    assert err.value.key_id == "k9" and "k9" in str(err.value)
    assert TOKEN not in str(err.value) and "sealed:" not in str(err.value)


@pytest.mark.parametrize("text", [TOKEN, "", "sealed:v2:", "sealed:v2:k1", "sealed:v3:k1:AAAA",
                                  "sealed:v2:k/1:AAAA"])
def test_what_is_not_a_sealed_token_is_refused_without_quoting_it(text: str) -> None:
    keys, _ = _pair("k1")
    with pytest.raises(NotSealed) as err:
        keys.open(text, CHARGE)
    assert not text or text not in str(err.value)


def test_a_token_of_version_1_is_not_opened() -> None:
    """Version 1 bound the order only: a token of it, for whatever charge, is refused as not
    sealed (its events were drained before the upgrade)."""
    keys, key = _pair("k1")
    version_1 = key.seal(TOKEN, CHARGE).replace("sealed:v2:", "sealed:v1:")
    assert not sealing.is_sealed(version_1)
    with pytest.raises(NotSealed):
        keys.open(version_1, CHARGE)


def test_keys_rotate_by_key_id() -> None:
    """pagos holds the old and the new key while tokens sealed with either may still come;
    pedidos seals with the new one only."""
    old_private, old_public = sealing.new_key_pair("2026-01")
    new_private, new_public = sealing.new_key_pair("2026-07")
    sealed_before = parse_sealing_key(old_public).seal(TOKEN, CHARGE)
    sealed_after = parse_sealing_key(new_public).seal("tok_mastercard", CHARGE)

    during = parse_opening_keys(f"{old_private}\n{new_private}\n")
    assert during.key_ids == ("2026-01", "2026-07")
    assert during.open(sealed_before, CHARGE) == TOKEN
    assert during.open(sealed_after, CHARGE) == "tok_mastercard"

    after = parse_opening_keys(new_private)
    assert after.open(sealed_after, CHARGE) == "tok_mastercard"
    with pytest.raises(UnknownKeyId):
        after.open(sealed_before, CHARGE)


def test_a_key_is_named_after_its_fingerprint_unless_named() -> None:
    private, public = sealing.new_key_pair()
    key = parse_sealing_key(public)
    assert key.key_id == sealing.fingerprint(key.public_key) == private.split(":")[0]
    assert len(key.key_id) == 16
    assert parse_opening_keys(private).sealing_key(key.key_id) == key


@pytest.mark.parametrize("text", ["", "k1", "k1:", "k1:AAAA", "bad id:" + "A" * 43 + "=",
                                  "k" * 33 + ":" + "A" * 43 + "="])
def test_a_malformed_key_is_refused_without_quoting_it(text: str) -> None:
    with pytest.raises(InvalidKey) as err:
        parse_opening_keys(text)
    assert not text.partition(":")[2] or text.partition(":")[2] not in str(err.value)
    with pytest.raises(InvalidKey):
        parse_sealing_key(text)


def test_a_key_id_given_twice_is_refused() -> None:
    private, _ = sealing.new_key_pair("k1")
    other, _ = sealing.new_key_pair("k1")
    with pytest.raises(InvalidKey, match="twice"):
        parse_opening_keys(f"{private},{other}")


def test_the_opening_keys_repr_names_the_key_ids_only() -> None:
    private, _ = sealing.new_key_pair("k1")
    keys = parse_opening_keys(private)
    assert repr(keys) == "OpeningKeys(key_ids=['k1'])"
    assert private.split(":")[1] not in repr(keys)


def test_a_token_too_long_to_seal_is_refused() -> None:
    _, key = _pair("k1")
    with pytest.raises(sealing.SealingError):
        key.seal("x" * (sealing.MAX_TOKEN_BYTES + 1), CHARGE)
    with pytest.raises(sealing.SealingError):
        key.seal("", CHARGE)

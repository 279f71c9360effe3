"""The payment token sealed for pagos: only the holder of the private key opens it, only for the
order it was sealed for; a changed ciphertext, another key or an unknown key id never opens;
keys rotate by key id; the sealed form is what the schemas accept, and never the token."""

from __future__ import annotations

import base64

import pytest

from saga_contracts import registry, sealing
from saga_contracts.sealing import (
    CannotOpen,
    InvalidKey,
    NotSealed,
    UnknownKeyId,
    parse_opening_keys,
    parse_sealing_key,
)

ORDER = "9b1f4c1e-8f57-4a43-9d6a-0b1b8c9f3e11"
OTHER_ORDER = "0c2e7a9d-1111-4a43-9d6a-0b1b8c9f3e11"
TOKEN = "tok_visa_5f3a9c"


def _pair(key_id: str) -> tuple[sealing.OpeningKeys, sealing.SealingKey]:
    private, public = sealing.new_key_pair(key_id)
    return parse_opening_keys(private), parse_sealing_key(public)


def test_a_sealed_token_opens_with_the_private_key_for_its_order() -> None:
    keys, key = _pair("k1")
    sealed = key.seal(TOKEN, ORDER)
    assert sealed.startswith("sealed:v1:k1:") and TOKEN not in sealed
    assert sealing.is_sealed(sealed) and sealing.key_id_of(sealed) == "k1"
    assert keys.open(sealed, ORDER) == TOKEN
    assert keys.open(sealed, ORDER.upper()) == TOKEN, "an order id in either case is one order"


def test_each_seal_of_the_same_token_differs() -> None:
    _, key = _pair("k1")
    assert key.seal(TOKEN, ORDER) != key.seal(TOKEN, ORDER)


def test_a_sealed_token_is_what_the_schemas_accept() -> None:
    _, key = _pair("k1")
    for token in ("t", TOKEN, "x" * 255, "ñ" * 255):
        payment_method = {"type": "credit_card", "token": key.seal(token, ORDER)}
        registry.validate("StockVerificado", "2.0.0", {
            "order_id": ORDER, "items": [{"sku": "A", "quantity": 1}], "total_amount": "1.00",
            "currency": "USD", "payment_method": payment_method})


def test_the_wrong_private_key_does_not_open_it() -> None:
    _, key = _pair("k1")
    impostor, _ = _pair("k1")  # another key pair under the same key id
    with pytest.raises(CannotOpen):
        impostor.open(key.seal(TOKEN, ORDER), ORDER)


def test_a_token_sealed_for_another_order_does_not_open() -> None:
    """A sealed token copied into a forged event for another order charges nobody."""
    keys, key = _pair("k1")
    with pytest.raises(CannotOpen):
        keys.open(key.seal(TOKEN, OTHER_ORDER), ORDER)


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
        keys.open(_flip(key.seal(TOKEN, ORDER), position), ORDER)


def test_a_cut_ciphertext_does_not_open() -> None:
    keys, key = _pair("k1")
    sealed = key.seal(TOKEN, ORDER)
    for cut in (sealed[:-4], sealed[:-30], sealed.rsplit(":", 1)[0] + ":AAAA"):
        with pytest.raises(CannotOpen):
            keys.open(cut, ORDER)


def test_a_relabelled_key_id_does_not_open() -> None:
    """The key id is bound into the ciphertext: the same key known under two ids opens only
    what was sealed under the id it names."""
    private, public = sealing.new_key_pair("k1")
    both = parse_opening_keys(f"{private},{private.replace('k1:', 'k2:')}")
    sealed = parse_sealing_key(public).seal(TOKEN, ORDER)
    with pytest.raises(CannotOpen):
        both.open(sealed.replace(":k1:", ":k2:"), ORDER)


def test_an_unknown_key_id_is_named_and_the_token_is_not() -> None:
    keys, _ = _pair("k1")
    _, other = _pair("k9")
    with pytest.raises(UnknownKeyId) as err:
        keys.open(other.seal(TOKEN, ORDER), ORDER)
    assert err.value.key_id == "k9" and "k9" in str(err.value)
    assert TOKEN not in str(err.value) and "sealed:" not in str(err.value)


@pytest.mark.parametrize("text", [TOKEN, "", "sealed:v1:", "sealed:v1:k1", "sealed:v2:k1:AAAA",
                                  "sealed:v1:k/1:AAAA"])
def test_what_is_not_a_sealed_token_is_refused_without_quoting_it(text: str) -> None:
    keys, _ = _pair("k1")
    with pytest.raises(NotSealed) as err:
        keys.open(text, ORDER)
    assert not text or text not in str(err.value)


def test_keys_rotate_by_key_id() -> None:
    """pagos holds the old and the new key while tokens sealed with either may still come;
    pedidos seals with the new one only."""
    old_private, old_public = sealing.new_key_pair("2026-01")
    new_private, new_public = sealing.new_key_pair("2026-07")
    sealed_before = parse_sealing_key(old_public).seal(TOKEN, ORDER)
    sealed_after = parse_sealing_key(new_public).seal("tok_mastercard", ORDER)

    during = parse_opening_keys(f"{old_private}\n{new_private}\n")
    assert during.key_ids == ("2026-01", "2026-07")
    assert during.open(sealed_before, ORDER) == TOKEN
    assert during.open(sealed_after, ORDER) == "tok_mastercard"

    after = parse_opening_keys(new_private)
    assert after.open(sealed_after, ORDER) == "tok_mastercard"
    with pytest.raises(UnknownKeyId):
        after.open(sealed_before, ORDER)


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
        key.seal("x" * (sealing.MAX_TOKEN_BYTES + 1), ORDER)
    with pytest.raises(sealing.SealingError):
        key.seal("", ORDER)

"""The operator's signature of a replay: it verifies for the record it was made for, with the
key it names, and for nothing else; the services' list of public keys is read strictly."""

from __future__ import annotations

import base64
from dataclasses import replace

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saga_contracts import replay_signature as rs
from saga_contracts.replay_signature import Forgery, InvalidKey, OperatorKeys, Signed

RECORD = Signed(replay_for="inventario", topic="payment-events", key=b"saga-1",
                value=b'{"message_id": "m-2"}', message_id="m-2", saga_id="saga-1")


def _key() -> Ed25519PrivateKey:
    return rs.load_private_key(rs.new_private_key())


def test_a_signature_verifies_for_its_record_with_the_key_it_names() -> None:
    key = _key()
    keys = OperatorKeys.parse(rs.public_entry(key))
    assert keys.forgery(rs.sign(key, RECORD), RECORD) is None


@pytest.mark.parametrize("other", [
    replace(RECORD, replay_for="pedidos"),
    replace(RECORD, topic="order-events"),
    replace(RECORD, key=b"saga-2"),
    replace(RECORD, key=None),
    replace(RECORD, value=b'{"message_id": "m-3"}'),
    replace(RECORD, value=None),
    replace(RECORD, message_id="m-3"),
    replace(RECORD, saga_id="saga-2"),
], ids=["address", "topic", "key", "no key", "value", "no value", "message id", "saga id"])
def test_a_signature_does_not_verify_for_another_record(other: Signed) -> None:
    key = _key()
    keys = OperatorKeys.parse(rs.public_entry(key))
    assert keys.forgery(rs.sign(key, RECORD), other) is Forgery.INVALID


def test_fields_cannot_run_into_each_other() -> None:
    # Written end to end, these two would read the same.
    assert (replace(RECORD, replay_for="a", topic="bc").canonical()
            != replace(RECORD, replay_for="ab", topic="c").canonical())


def test_no_signature_a_stranger_s_key_and_garbage_are_told_apart() -> None:
    key, stranger = _key(), _key()
    keys = OperatorKeys.parse(rs.public_entry(key))
    key_id = rs.key_id(key.public_key())
    assert keys.forgery(None, RECORD) is Forgery.UNSIGNED
    assert keys.forgery("", RECORD) is Forgery.UNSIGNED
    assert keys.forgery(rs.sign(stranger, RECORD), RECORD) is Forgery.UNKNOWN_KEY
    assert keys.forgery(f"{key_id}:not base64!", RECORD) is Forgery.INVALID
    assert keys.forgery(f"{key_id}:" + base64.b64encode(b"short").decode(), RECORD) \
        is Forgery.INVALID
    # The stranger's signature under the operator's key id.
    stolen_id = f"{key_id}:{rs.sign(stranger, RECORD).partition(':')[2]}"
    assert keys.forgery(stolen_id, RECORD) is Forgery.INVALID


def test_without_keys_nothing_verifies() -> None:
    assert OperatorKeys.parse(None).forgery(rs.sign(_key(), RECORD), RECORD) \
        is Forgery.UNKNOWN_KEY


def test_several_keys_verify_each_its_own_signatures() -> None:
    old, new = _key(), _key()
    keys = OperatorKeys.parse(f" {rs.public_entry(old)} ,{rs.public_entry(new)},")
    assert keys.ids == sorted([rs.key_id(old.public_key()), rs.key_id(new.public_key())])
    assert keys.forgery(rs.sign(old, RECORD), RECORD) is None
    assert keys.forgery(rs.sign(new, RECORD), RECORD) is None


def test_the_key_files_round_trip() -> None:
    pem = rs.new_private_key()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    public = rs.load_public_pem(rs.public_pem(pem))
    assert rs.public_entry(public) == rs.public_entry(rs.load_private_key(pem))


@pytest.mark.parametrize("text", [
    "no-colon",
    "0123456789abcdef:not base64!",
    "0123456789abcdef:" + base64.b64encode(b"31 bytes, not an ed25519 key..").decode(),
])
def test_a_list_of_keys_that_cannot_be_read_is_refused(text: str) -> None:
    with pytest.raises(InvalidKey):
        OperatorKeys.parse(text)


def test_an_id_that_is_not_its_key_s_is_refused() -> None:
    entry = rs.public_entry(_key())
    other_id = rs.key_id(_key().public_key())
    with pytest.raises(InvalidKey, match="its id is"):
        OperatorKeys.parse(f"{other_id}:{entry.partition(':')[2]}")


def test_a_private_key_file_of_another_kind_is_refused() -> None:
    with pytest.raises(InvalidKey):
        rs.load_private_key(b"not a key")

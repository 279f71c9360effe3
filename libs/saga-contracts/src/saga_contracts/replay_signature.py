"""The operator's signature on a replay's ``X-Replay-For``.

A replayed dead letter is addressed with ``X-Replay-For`` to the one consumer that gave up on
it, and the topic's other consumers skip it. Kafka does not tell a consumer who wrote a record,
so on its own that header would let anyone who can write to a topic hide a record from the
services that should see it, by naming another one. ``sagactl replay`` therefore signs the
replay with the operator's Ed25519 key, in ``X-Replay-Signature: <key id>:<base64 signature>``,
and a consumer believes ``X-Replay-For`` only when the signature verifies with one of the
operator's public keys it was given.

What is signed (``Signed.canonical``) binds the signature to one record: the service it is
addressed to, the topic, the Kafka key, the message id and saga id of its headers, and the
SHA-256 of its value (which holds the envelope, its ids included). Moved to another record,
another topic or another service, it no longer verifies.

Keys: the private key is a PKCS#8 PEM file that only the operator holds. A public key travels
as ``<key id>:<base64 of its 32 raw bytes>``, its key id being the first 16 hex digits of the
SHA-256 of those bytes: the signer needs nothing but its private key to name it, a new key has
a new id, and a list of keys that pairs an id with another key is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

# Changes whenever what is signed changes, so that a signature never verifies under another
# reading of its bytes.
_DOMAIN = "saga-replay-signature/1"
_KEY_ID_HEX_DIGITS = 16


class InvalidKey(ValueError):
    """A key, or a list of public keys, that cannot be read."""


class Forgery(StrEnum):
    """Why an ``X-Replay-For`` is not believed."""

    UNSIGNED = "unsigned"
    """No ``X-Replay-Signature``."""
    UNKNOWN_KEY = "unknown_key"
    """Signed with a key the consumer was not given (or no key was given at all)."""
    INVALID = "invalid_signature"
    """Not a signature of this record by the key it names, or not a signature at all."""


@dataclass(frozen=True)
class Signed:
    """What of a replayed record its signature binds."""

    replay_for: str
    topic: str
    key: bytes | None
    value: bytes | None
    message_id: str
    """The ``X-Message-ID`` header."""
    saga_id: str
    """The ``X-Saga-ID`` header."""

    def canonical(self) -> bytes:
        """The signed bytes: a JSON array, so that no field can run into the next."""
        return json.dumps([
            _DOMAIN, self.replay_for, self.topic,
            None if self.key is None else self.key.hex(),
            self.message_id, self.saga_id,
            None if self.value is None else hashlib.sha256(self.value).hexdigest(),
        ], separators=(",", ":")).encode()


# ------------------------------------------------------------------ keys


def new_private_key() -> bytes:
    """A new operator key, as the PEM file that keeps it."""
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())


def load_private_key(pem: bytes) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InvalidKey(f"not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidKey(f"not an Ed25519 key but {type(key).__name__}")
    return key


def public_pem(private_pem: bytes) -> bytes:
    """The public half of a private key file, as a PEM file of its own."""
    return load_private_key(private_pem).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def load_public_pem(pem: bytes) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InvalidKey(f"not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidKey(f"not an Ed25519 key but {type(key).__name__}")
    return key


def _raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    return hashlib.sha256(_raw(key)).hexdigest()[:_KEY_ID_HEX_DIGITS]


def public_entry(key: Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """``<key id>:<base64 key>``, as a list of public keys names it."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return f"{key_id(public)}:{base64.b64encode(_raw(public)).decode()}"


# ------------------------------------------------------------------ signing and verifying


def sign(key: Ed25519PrivateKey, signed: Signed) -> str:
    """The ``X-Replay-Signature`` header of the record ``signed`` describes."""
    signature = base64.b64encode(key.sign(signed.canonical())).decode()
    return f"{key_id(key.public_key())}:{signature}"


class OperatorKeys:
    """The operator's public keys a consumer believes a replay's address from, by key id:
    several while a key is being replaced."""

    def __init__(self, keys: Mapping[str, Ed25519PublicKey] | None = None) -> None:
        self._keys = dict(keys or {})

    @classmethod
    def parse(cls, text: str | None) -> OperatorKeys:
        """``<key id>:<base64 key>``, comma-separated (blank: none). Raises ``InvalidKey``."""
        keys: dict[str, Ed25519PublicKey] = {}
        for entry in (text or "").split(","):
            entry = entry.strip()
            if not entry:
                continue
            given_id, sep, encoded = entry.partition(":")
            if not sep:
                raise InvalidKey(f"{entry[:24]!r}…: not <key id>:<base64 key>")
            try:
                key = Ed25519PublicKey.from_public_bytes(
                    base64.b64decode(encoded.strip(), validate=True))
            except (binascii.Error, ValueError):
                raise InvalidKey(f"key {given_id!r}: not the base64 of a 32-byte Ed25519 "
                                 "public key") from None
            if given_id.strip() != key_id(key):
                raise InvalidKey(f"key {given_id!r}: its id is {key_id(key)!r} (the first "
                                 f"{_KEY_ID_HEX_DIGITS} hex digits of the key's SHA-256)")
            keys[key_id(key)] = key
        return cls(keys)

    @property
    def ids(self) -> list[str]:
        return sorted(self._keys)

    def forgery(self, signature: str | None, signed: Signed) -> Forgery | None:
        """None when ``signature`` (an ``X-Replay-Signature``) is one of these keys' signature
        of the record ``signed`` describes; else why not."""
        if not signature:
            return Forgery.UNSIGNED
        given_id, _, encoded = signature.partition(":")
        key = self._keys.get(given_id)
        if key is None:
            return Forgery.UNKNOWN_KEY
        try:
            key.verify(base64.b64decode(encoded, validate=True), signed.canonical())
        except (binascii.Error, ValueError, InvalidSignature):
            return Forgery.INVALID
        return None

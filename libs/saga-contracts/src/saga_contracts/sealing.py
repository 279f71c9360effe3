"""The payment token as it travels: sealed for pagos by pedidos when the order is placed, opened
by pagos only right before its gateway call. Everything between (pedidos' outbox, the topics,
inventario's outbox, dead letters, traces, pagos' own payments table) holds ciphertext only.

The sealed form is one string, in the place of the token (``payment_method.token``)::

    sealed:v2:<key id>:<ciphertext, base64url without padding>

The ciphertext is HPKE's (RFC 9180) single-shot base mode: DHKEM(X25519, HKDF-SHA256),
HKDF-SHA256, ChaCha20-Poly1305, as ``cryptography`` implements it (the encapsulated key, 32
bytes, followed by the sealed token and its 16-byte tag). A standard construction from a
maintained library, not one of our own: the sender is anonymous, each seal uses a fresh
ephemeral key, and the AEAD refuses any change to the ciphertext.

HPKE's ``info`` binds the ciphertext to the one charge it is for (``Binding``): the format
version, the key id, the saga id, the order id, the customer, the currency and the amount in
the currency's minor units. Whoever can write the events a token travels in (inventario's
Kafka principal) cannot reuse it: copied into another saga's event, or into its own saga's
with another amount, currency or customer, or relabelled with another key id, it does not
open, and pagos charges nothing. The ``info`` is canonical JSON (sorted keys, no spaces, ASCII
escapes), so that no two bindings share an encoding: a field's value cannot run into the next.
The amount is bound in minor units, an integer, so that 12.5 and 12.50 are one amount.

Version 1 bound the key id and the order id only, and is not opened any more: an event that
carries one is refused by its model (docs/operations.md, events of before the binding).

Keys are X25519 key pairs written as ``<key id>:<base64 of the 32 raw bytes>``: pedidos seals
with one public key (its key id goes into every sealed token), pagos opens with any of the
private keys it holds, found by key id, which is how keys rotate (docs/operations.md). A key id
is a name the operator picks (letters, digits, ``-`` and ``_``, at most 32); ``new_key_pair``
names a key after its fingerprint when it is given none. A new pair, for pagos and pedidos::

    python -m saga_contracts.sealing [KEY_ID]
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.hpke import AEAD, KDF, KEM, Suite

from saga_contracts import minor_units

VERSION = 2
PREFIX = f"sealed:v{VERSION}:"
KEY_ID = r"[A-Za-z0-9_-]{1,32}"
# A token of at most 255 characters is at most 1020 bytes of UTF-8; sealed, 48 bytes more.
MAX_TOKEN_BYTES = 1020
_OVERHEAD = 32 + 16  # HPKE's encapsulated X25519 key, ChaCha20-Poly1305's tag


def _base64_chars(n_bytes: int) -> int:
    return -(-4 * n_bytes // 3)  # unpadded base64: ceil(4n / 3)


_MIN_CHARS = _base64_chars(1 + _OVERHEAD)
_MAX_CHARS = _base64_chars(MAX_TOKEN_BYTES + _OVERHEAD)
PATTERN = rf"^{PREFIX}{KEY_ID}:[A-Za-z0-9_-]{{{_MIN_CHARS},{_MAX_CHARS}}}$"
"""What a sealed token looks like: the schemas' pattern for ``payment_method.token``."""

_SEALED = re.compile(rf"{PREFIX}({KEY_ID}):([A-Za-z0-9_-]+)")
_KEY_TEXT = re.compile(rf"({KEY_ID}):([A-Za-z0-9+/]{{43}}=)")
_SUITE = Suite(KEM.X25519, KDF.HKDF_SHA256, AEAD.CHACHA20_POLY1305)
_PURPOSE = "saga-payment-token"


class SealingError(Exception):
    """A token that cannot be sealed or opened. The message never quotes the token, sealed or
    not."""


class NotSealed(SealingError):
    """The text is not a sealed token (a token in the clear, or a damaged one)."""


class UnknownKeyId(SealingError):
    """The token was sealed with a key whose private half this process does not hold."""

    def __init__(self, key_id: str) -> None:
        super().__init__(f"sealed with key id {key_id!r}, which is not among the keys held")
        self.key_id = key_id


class CannotOpen(SealingError):
    """The key id is known but the ciphertext does not open: sealed for another charge (another
    saga, order, customer, amount or currency), changed, or sealed with another key under that
    id. HPKE cannot tell these apart, and none of them is a token for this charge."""


class InvalidKey(SealingError, ValueError):
    """A key's text is not ``<key id>:<base64 of 32 bytes>``."""


@dataclass(frozen=True)
class Binding:
    """The one charge a sealed token is for: pedidos seals with the values of the order it
    places, pagos opens with those of the StockVerificado it acts on and the payment it
    records; the token opens only when every one of them is the same.

    Saga and order ids are uuids, whose text may come in either case, and currencies ISO 4217
    codes, either case too: their canonical forms (lower-case ids, upper-case code) are bound.
    The customer id is bound as it is."""

    saga_id: str
    order_id: str
    customer_id: str
    currency: str
    amount_minor: int
    """The amount to charge in the currency's minor units (``saga_contracts.minor_units``)."""

    @classmethod
    def of(cls, *, saga_id: str, order_id: str, customer_id: str, amount: Decimal,
           currency: str) -> Binding:
        """The binding of a charge of ``amount`` ``currency``. Raises
        ``minor_units.TooManyDecimals`` or ``minor_units.UnknownCurrency`` for an amount its
        currency cannot hold (no such charge can be made)."""
        return cls(saga_id, order_id, customer_id, currency,
                   minor_units.to_minor_units(amount, currency))

    def info(self, key_id: str) -> bytes:
        """HPKE's ``info`` for this charge, sealed with ``key_id``: canonical JSON."""
        return json.dumps({
            "purpose": _PURPOSE, "version": VERSION, "key_id": key_id,
            "saga_id": self.saga_id.lower(), "order_id": self.order_id.lower(),
            "customer_id": self.customer_id, "currency": self.currency.upper(),
            "amount_minor": self.amount_minor,
        }, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def is_sealed(text: str) -> bool:
    return re.fullmatch(PATTERN, text) is not None


def key_id_of(sealed: str) -> str:
    """The key id a sealed token names."""
    m = _SEALED.fullmatch(sealed)
    if m is None:
        raise NotSealed(f"not a sealed payment token of version {VERSION}")
    return m.group(1)


@dataclass(frozen=True)
class SealingKey:
    """The public key pedidos seals with, and the id pagos knows its private half by."""

    key_id: str
    public_key: X25519PublicKey

    def seal(self, token: str, binding: Binding) -> str:
        """``token`` sealed for the holder of this key's private half, for the charge
        ``binding`` describes only."""
        plain = token.encode()
        if not plain or len(plain) > MAX_TOKEN_BYTES:
            raise SealingError(f"a payment token is 1 to {MAX_TOKEN_BYTES} bytes of UTF-8")
        sealed = _SUITE.encrypt(plain, self.public_key, info=binding.info(self.key_id))
        return f"{PREFIX}{self.key_id}:{_b64url(sealed)}"

    def text(self) -> str:
        return f"{self.key_id}:{base64.b64encode(self.public_key.public_bytes_raw()).decode()}"


class OpeningKeys:
    """The private keys pagos opens sealed tokens with, by key id (more than one while keys
    rotate). Its repr names the key ids only."""

    def __init__(self, keys: Mapping[str, X25519PrivateKey]) -> None:
        self._keys = MappingProxyType(dict(keys))

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._keys))

    def open(self, sealed: str, binding: Binding) -> str:
        """The token ``sealed`` holds, if it was sealed for the charge ``binding`` describes.
        Raises ``NotSealed``, ``UnknownKeyId`` or ``CannotOpen``: each is final for that token
        and that charge, no retry opens it."""
        m = _SEALED.fullmatch(sealed)
        if m is None:
            raise NotSealed(f"not a sealed payment token of version {VERSION}")
        key_id, body = m.groups()
        key = self._keys.get(key_id)
        if key is None:
            raise UnknownKeyId(key_id)
        try:
            plain = _SUITE.decrypt(_unb64url(body), key, info=binding.info(key_id))
            return plain.decode()
        except (InvalidTag, ValueError, binascii.Error) as exc:
            raise CannotOpen(f"the token sealed with key id {key_id!r} does not open for this "
                             "charge's saga, order, customer, currency and amount (or it was "
                             "changed, or sealed with another key)") from exc

    def sealing_key(self, key_id: str) -> SealingKey:
        """The public half of the key ``key_id`` (tests seal with it)."""
        return SealingKey(key_id, self._keys[key_id].public_key())

    def __repr__(self) -> str:
        return f"OpeningKeys(key_ids={list(self.key_ids)})"


def _parts(text: str) -> tuple[str, bytes]:
    m = _KEY_TEXT.fullmatch(text.strip())
    if m is None:
        # The text may be a private key: it is not quoted.
        raise InvalidKey("a key is written <key id>:<base64 of its 32 bytes> (key id: letters, "
                         "digits, - and _, at most 32)")
    return m.group(1), base64.b64decode(m.group(2))


def parse_sealing_key(text: str) -> SealingKey:
    """``<key id>:<base64 public key>``."""
    key_id, raw = _parts(text)
    return SealingKey(key_id, X25519PublicKey.from_public_bytes(raw))


def parse_opening_keys(text: str) -> OpeningKeys:
    """One or more ``<key id>:<base64 private key>``, separated by commas or white space (one a
    line in a file)."""
    keys: dict[str, X25519PrivateKey] = {}
    for entry in re.split(r"[,\s]+", text.strip()):
        if not entry:
            continue
        key_id, raw = _parts(entry)
        if key_id in keys:
            raise InvalidKey(f"key id {key_id!r} is given twice")
        keys[key_id] = X25519PrivateKey.from_private_bytes(raw)
    if not keys:
        raise InvalidKey("no key given")
    return OpeningKeys(keys)


def fingerprint(public_key: X25519PublicKey) -> str:
    """A key id for a key that has no name: the first 8 bytes of its SHA-256, in hex."""
    return hashlib.sha256(public_key.public_bytes_raw()).hexdigest()[:16]


def new_key_pair(key_id: str | None = None) -> tuple[str, str]:
    """A new key pair as text: (the private key for pagos, the public key for pedidos), both
    ``<key id>:<base64>``; named after its fingerprint unless ``key_id`` is given."""
    private = X25519PrivateKey.generate()
    public = private.public_key()
    key_id = key_id or fingerprint(public)
    if not re.fullmatch(KEY_ID, key_id):
        raise InvalidKey("a key id is letters, digits, - and _, at most 32")
    raw = private.private_bytes_raw()
    return (f"{key_id}:{base64.b64encode(raw).decode()}",
            SealingKey(key_id, public).text())


def main(argv: list[str]) -> int:
    """Prints a new key pair as the two services' settings (the private key first: keep it
    secret)."""
    try:
        private, public = new_key_pair(argv[0] if argv else None)
    except InvalidKey as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"PAGOS_PAYMENT_TOKEN_OPEN_KEYS={private}")
    print(f"PEDIDOS_PAYMENT_TOKEN_SEAL_KEY={public}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

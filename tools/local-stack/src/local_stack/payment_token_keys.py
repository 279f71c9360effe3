"""The key pair that seals payment tokens for pagos (``saga_contracts.sealing``): made at the
stack's first start, kept with its other secrets, and handed to the two services that use it
as files, never in their environment: pedidos gets the public key it seals with, pagos the
private key it opens with. A key made once is kept: sealed tokens still in flight (an outbox,
a topic, a dead letter) open across restarts.

Both files hold ``<key id>:<base64>``, the key id being the public key's fingerprint.
"""

from __future__ import annotations

from pathlib import Path

from local_stack import secrets
from saga_contracts.sealing import new_key_pair, parse_opening_keys

PRIVATE = "payment-token-seal.key"
PUBLIC = "payment-token-seal.pub"


def _public_of(private: bytes) -> bytes:
    keys = parse_opening_keys(private.decode())
    [key_id] = keys.key_ids
    return (keys.sealing_key(key_id).text() + "\n").encode()


def key_files() -> tuple[Path, Path]:
    """(pagos' private key file, pedidos' public key file), the pair made if it was not."""
    private = secrets.stored(PRIVATE, lambda: (new_key_pair()[0] + "\n").encode())
    # Made from the private key, not with it: whichever process stored the private key first,
    # the public key is its half.
    secrets.stored(PUBLIC, lambda: _public_of(private))
    return secrets.path_of(PRIVATE), secrets.path_of(PUBLIC)


def service_env(service: str) -> dict[str, str]:
    """What ``service`` is given of the key pair, if anything."""
    if service not in ("pedidos", "pagos"):
        return {}
    private, public = key_files()
    if service == "pedidos":
        return {"PEDIDOS_PAYMENT_TOKEN_SEAL_KEY_FILE": str(public)}
    return {"PAGOS_PAYMENT_TOKEN_OPEN_KEYS_FILE": str(private)}

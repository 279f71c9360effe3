"""pedidos' fingerprint key (``PEDIDOS_FINGERPRINT_KEY``: the secret its fingerprints of payment
tokens and requests are keyed with), made at the stack's first start like its other secrets and
kept across restarts, so that the decline limit per card and the Idempotency-Keys of orders
placed before still recognise what they saw. Handed to pedidos as a file, never in its
environment.
"""

from __future__ import annotations

import secrets as random
from pathlib import Path

from local_stack import secrets

SECRET = "pedidos-fingerprint-key"


def key_file() -> Path:
    """The file that holds the key, the key made if it was not."""
    secrets.stored(SECRET, lambda: random.token_urlsafe(32).encode())
    return secrets.path_of(SECRET)


def service_env(service: str) -> dict[str, str]:
    """What ``service`` is given of the key: pedidos the file, no other service anything."""
    return {"PEDIDOS_FINGERPRINT_KEY_FILE": str(key_file())} if service == "pedidos" else {}

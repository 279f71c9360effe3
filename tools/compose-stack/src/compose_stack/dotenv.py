"""A complete ``.env`` for docker-compose.yml, made from ``.env.example``: a random URL-safe
password for every ``*_PASSWORD``, a new payment-token key pair, pedidos' fingerprint key and a
fake-gateway secret key.
The optional variables (``SAGA_OPERATOR_PUBLIC_KEYS``) stay empty. Written 0600.

    python -m compose_stack dotenv [PATH]     (default: the checkout's .env; never overwritten)
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from compose_stack.settings import ROOT
from saga_contracts.sealing import new_key_pair

EXAMPLE = ROOT / ".env.example"
VARIABLE = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>.*)$")


def values() -> dict[str, str]:
    """Every variable .env.example lists, with a value of its kind (empty for the optional)."""
    open_keys, seal_key = new_key_pair()
    filled: dict[str, str] = {}
    for line in EXAMPLE.read_text().splitlines():
        found = VARIABLE.match(line)
        if not found:
            continue
        name = found["name"]
        if name.endswith("_PASSWORD"):
            filled[name] = secrets.token_urlsafe(24)
        elif name == "PAGOS_PAYMENT_TOKEN_OPEN_KEYS":
            filled[name] = open_keys
        elif name == "PEDIDOS_PAYMENT_TOKEN_SEAL_KEY":
            filled[name] = seal_key
        elif name == "PEDIDOS_FINGERPRINT_KEY":
            filled[name] = secrets.token_urlsafe(32)
        elif name == "GATEWAY_SECRET_KEY":
            filled[name] = "sk_test_" + secrets.token_urlsafe(24)
        else:
            filled[name] = found["value"]
    return filled


def write(path: Path) -> dict[str, str]:
    """Writes a new .env at ``path`` (which must not exist) and returns its values."""
    filled = values()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("# Made by python -m compose_stack dotenv from .env.example. Never commit it.\n")
        out.writelines(f"{name}={value}\n" for name, value in filled.items())
    return filled

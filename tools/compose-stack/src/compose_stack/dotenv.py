"""A complete ``.env`` for docker-compose.yml, made from ``.env.example``: a random URL-safe
password for every ``*_PASSWORD``, a new payment-token key pair, pedidos' fingerprint key, a
fake-gateway secret key, the console's session key and replay-signing key
(``CONSOLA_SIGNING_KEY``), the identity-provider container as the issuer, and a new operator
replay-signing key for sagactl: its private half in ``operator-signing.key`` beside the ``.env``
(0600, for ``SAGACTL_SIGNING_KEY_FILE``; never overwritten). ``SAGA_OPERATOR_PUBLIC_KEYS`` lists
both public halves. Written 0600.

    python -m compose_stack dotenv [PATH]     (default: the checkout's .env; never overwritten)
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from compose_stack.settings import ROOT
from saga_contracts import replay_signature
from saga_contracts.sealing import new_key_pair

EXAMPLE = ROOT / ".env.example"
VARIABLE = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>.*)$")


SIGNING_KEY = "operator-signing.key"
# The identity-provider container's issuer (its IDENTITY_ISSUER in docker-compose.yml).
IDENTITY_PROVIDER_ISSUER = "http://identity-provider:8020"


def values(operator_key: bytes | None = None) -> dict[str, str]:
    """Every variable .env.example lists, with a value of its kind (empty for the optional);
    ``operator_key``: the operator's private key (PEM) whose public half the services get."""
    open_keys, seal_key = new_key_pair()
    operator_key = operator_key or replay_signature.new_private_key()
    console_key = replay_signature.new_private_key()
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
        elif name == "CONSOLA_SESSION_SECRET":
            filled[name] = secrets.token_urlsafe(48)
        elif name == "CONSOLA_SIGNING_KEY":
            filled[name] = pem_body(console_key)
        elif name == "AUTH_ISSUER":
            # The file's identity provider: a development stand-in (.env.example).
            filled[name] = IDENTITY_PROVIDER_ISSUER
        elif name == "SAGA_OPERATOR_PUBLIC_KEYS":
            filled[name] = ",".join(
                replay_signature.public_entry(replay_signature.load_private_key(key))
                for key in (operator_key, console_key))
        else:
            filled[name] = found["value"]
    return filled


def pem_body(pem: bytes) -> str:
    """A PEM's base64, on one line: what a .env holds of a key (``CONSOLA_SIGNING_KEY``)."""
    return "".join(line for line in pem.decode().splitlines() if not line.startswith("-----"))


def write(path: Path) -> dict[str, str]:
    """Writes a new .env at ``path`` (which must not exist) and returns its values; the
    operator's key beside it is made if missing, and used."""
    key_file = path.parent / SIGNING_KEY
    if not key_file.exists():
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as key_out:
            key_out.write(replay_signature.new_private_key())
    filled = values(key_file.read_bytes())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("# Made by python -m compose_stack dotenv from .env.example. Never commit it.\n")
        out.writelines(f"{name}={value}\n" for name, value in filled.items())
    return filled

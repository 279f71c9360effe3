"""The fake gateway's secret key (``sk_test_...``), made at the stack's first start like its other
secrets and kept across restarts: the gateway requires it on every call, pagos sends it, and
the tests and tools that read the gateway's ledger present it too (``make credentials`` prints
it). Handed to the gateway and to pagos as a file, never in their environment.
"""

from __future__ import annotations

import secrets as random
from pathlib import Path

from local_stack import secrets

SECRET = "gateway-secret-key"


def key_file() -> Path:
    """The file that holds the key, the key made if it was not."""
    secrets.stored(SECRET, lambda: f"sk_test_{random.token_urlsafe(24)}".encode())
    return secrets.path_of(SECRET)


def gateway_env() -> dict[str, str]:
    return {"GATEWAY_SECRET_KEY_FILE": str(key_file())}


def service_env(service: str) -> dict[str, str]:
    """What ``service`` is given of the key: pagos the file, no other service anything."""
    return {"PAGOS_GATEWAY_SECRET_KEY_FILE": str(key_file())} if service == "pagos" else {}

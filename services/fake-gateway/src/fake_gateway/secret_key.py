"""The gateway's secret key, as Stripe's API takes one: ``Authorization: Bearer sk_...`` on every
call but the health check. Given by ``GATEWAY_SECRET_KEY`` or, to keep it out of the
environment, by the file ``GATEWAY_SECRET_KEY_FILE`` names (the local stack generates one at
its first start and passes it this way). Never logged."""

from __future__ import annotations

import hmac
import os
from pathlib import Path


class MissingSecretKey(RuntimeError):
    pass


def configured_key() -> str:
    """The key from the environment; stops the gateway, naming the variables, without one."""
    value = os.environ.get("GATEWAY_SECRET_KEY") or None
    path = os.environ.get("GATEWAY_SECRET_KEY_FILE") or None
    if value is not None and path is not None:
        raise MissingSecretKey("GATEWAY_SECRET_KEY and GATEWAY_SECRET_KEY_FILE are both set; "
                               "give one")
    if path is not None:
        try:
            value = Path(path).read_text().strip()
        except OSError as exc:
            raise MissingSecretKey(f"GATEWAY_SECRET_KEY_FILE: cannot read {path} "
                                   f"({exc.strerror})") from exc
    if not value:
        raise MissingSecretKey("GATEWAY_SECRET_KEY (or GATEWAY_SECRET_KEY_FILE) is not set")
    return value.strip()


def presented(authorization: str | None, key: str) -> bool:
    """Whether the ``Authorization`` header carries ``key`` as its bearer token. Compared in
    constant time: how long a refusal takes says nothing of how much of the key was right."""
    scheme, _, token = (authorization or "").partition(" ")
    return hmac.compare_digest(token.strip().encode(), key.encode()) and \
        scheme.lower() == "bearer"

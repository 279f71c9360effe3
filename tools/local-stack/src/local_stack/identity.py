"""The local identity provider (services/identity-provider): its signing key, made at the
stack's first start like the stack's other secrets, and what the services are told to trust.

The key stays in ``.local/secrets/identity-signing.key`` across restarts, so tokens handed out
before a restart still verify. To rotate it: rename it to ``identity-signing.previous.key`` and
``make restart PART=identity``; a new key is made and signs, the previous one
stays published until it is deleted (and the identity provider restarted once more).
"""

from __future__ import annotations

import json
import urllib.request

from identity_provider.keys import new_private_key_pem
from local_stack import secrets
from local_stack.settings import IDENTITY_PORT

SIGNING = "identity-signing.key"
PREVIOUS = "identity-signing.previous.key"
ISSUER = f"http://127.0.0.1:{IDENTITY_PORT}"
AUDIENCE = "saga"



def provider_env() -> dict[str, str]:
    """The identity provider's environment: its port, issuer, audience and keys."""
    secrets.stored(SIGNING, new_private_key_pem)
    env = {"IDENTITY_HOST": "127.0.0.1", "IDENTITY_PORT": str(IDENTITY_PORT),
           "IDENTITY_ISSUER": ISSUER, "IDENTITY_AUDIENCE": AUDIENCE,
           "IDENTITY_SIGNING_KEY_FILE": str(secrets.path_of(SIGNING)),
           "IDENTITY_PUBLISHED_KEY_FILES": ""}
    if secrets.path_of(PREVIOUS).exists():
        env["IDENTITY_PUBLISHED_KEY_FILES"] = str(secrets.path_of(PREVIOUS))
    return env


def service_env() -> dict[str, str]:
    """What every service is told to trust."""
    return {"AUTH_ISSUER": ISSUER, "AUTH_AUDIENCE": AUDIENCE}


def token_url() -> str:
    return f"{ISSUER}/token"


def new_token(sub: str, roles: list[str], expires_in: int | None = None) -> str:
    """A token from the running identity provider."""
    body = {"sub": sub, "roles": roles, **({"expires_in": expires_in} if expires_in else {})}
    request = urllib.request.Request(token_url(), data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return str(json.loads(response.read())["access_token"])


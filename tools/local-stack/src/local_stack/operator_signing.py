"""The operators' replay-signing key pairs (``saga_contracts.replay_signature``), made at the
stack's first start like its other secrets: sagactl's and the console's, one each, so that
either can be replaced without the other. The private halves stay in ``.local/secrets/``, where
``sagactl`` finds its own when run from the checkout and the console is given its own
(``CONSOLA_SIGNING_KEY_FILE``); the services get both public halves in
``SAGA_OPERATOR_PUBLIC_KEYS``. Deleting a key's two files and restarting the stack replaces it.
"""

from __future__ import annotations

from pathlib import Path

from local_stack import secrets
from saga_contracts import replay_signature

PRIVATE = "operator-signing.key"
PUBLIC = "operator-signing.pub"
CONSOLE_PRIVATE = "consola-signing.key"
CONSOLE_PUBLIC = "consola-signing.pub"


def _public_entry(private_name: str, public_name: str) -> str:
    private = secrets.stored(private_name, replay_signature.new_private_key)
    public = secrets.stored(public_name, lambda: replay_signature.public_pem(private))
    return replay_signature.public_entry(replay_signature.load_public_pem(public))


def public_keys() -> str:
    """``SAGA_OPERATOR_PUBLIC_KEYS`` for the services: sagactl's key, then the console's."""
    return ",".join((_public_entry(PRIVATE, PUBLIC),
                     _public_entry(CONSOLE_PRIVATE, CONSOLE_PUBLIC)))


def console_key_file() -> Path:
    """The console's private key, made if missing (``CONSOLA_SIGNING_KEY_FILE``)."""
    _public_entry(CONSOLE_PRIVATE, CONSOLE_PUBLIC)
    return secrets.path_of(CONSOLE_PRIVATE)

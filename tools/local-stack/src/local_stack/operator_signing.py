"""The operator's replay-signing key pair (``saga_contracts.replay_signature``), made at the
stack's first start like its other secrets: the private half stays in ``.local/secrets/``,
where ``sagactl`` finds it when run from the checkout; the services get the public half in
``SAGA_OPERATOR_PUBLIC_KEYS``. Deleting both files and restarting the stack replaces the key.
"""

from __future__ import annotations

from local_stack import secrets
from saga_contracts import replay_signature

PRIVATE = "operator-signing.key"
PUBLIC = "operator-signing.pub"


def public_keys() -> str:
    """``SAGA_OPERATOR_PUBLIC_KEYS`` for the services: the stack's operator key."""
    private = secrets.stored(PRIVATE, replay_signature.new_private_key)
    public = secrets.stored(PUBLIC, lambda: replay_signature.public_pem(private))
    return replay_signature.public_entry(replay_signature.load_public_pem(public))

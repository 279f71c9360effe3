"""Payment tokens sealed as pedidos seals them, for tests that write events themselves.

- ``sealed`` and ``opening_keys``: a key pair made for this test process, for unit and
  integration tests that run pedidos' or pagos' code in the process (pagos' worker opens with
  ``opening_keys()``).
- ``stack_sealed``: sealed with the running local stack's key, for an event a test writes to
  the stack's Kafka, which the stack's pagos then opens. The stack makes its key pair at its
  first start (``local_stack.payment_token_keys``).
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from saga_contracts.sealing import (
    OpeningKeys,
    SealingKey,
    new_key_pair,
    parse_opening_keys,
    parse_sealing_key,
)
from saga_harness.config import ROOT

TEST_KEY_ID = "test"


@cache
def opening_keys() -> OpeningKeys:
    """The private half of this process's test key, as pagos holds its keys."""
    private, _ = new_key_pair(TEST_KEY_ID)
    return parse_opening_keys(private)


def sealing_key() -> SealingKey:
    """The public half of this process's test key, as pedidos seals with it."""
    return opening_keys().sealing_key(TEST_KEY_ID)


def sealed(token: str, order_id: str) -> str:
    """``token`` sealed for ``order_id`` with this process's test key."""
    return sealing_key().seal(token, order_id)


def stack_key_file() -> Path:
    state = Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local"))
    return state / "secrets" / "payment-token-seal.pub"


def stack_sealed(token: str, order_id: str) -> str:
    """``token`` sealed for ``order_id`` with the running stack's key, as its pedidos seals."""
    path = stack_key_file()
    if not path.exists():
        raise FileNotFoundError(f"no payment token key at {path}: is the local stack up?")
    return parse_sealing_key(path.read_text()).seal(token, order_id)

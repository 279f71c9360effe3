"""Payment tokens sealed as pedidos seals them, for tests that write events themselves.

A token is sealed for one charge (``charge``: saga, order, customer, amount, currency), and
pagos opens it only for the StockVerificado of that charge (``saga_contracts.sealing``): an
event a test writes must carry the values its token was sealed for, its customer in the
envelope's ``metadata.user_id``, or pagos charges nothing.

- ``sealed`` and ``opening_keys``: a key pair made for this test process, for unit and
  integration tests that run pedidos' or pagos' code in the process (pagos' worker opens with
  ``opening_keys()``).
- ``stack_sealed``: sealed with the running local stack's key, for an event a test writes to
  the stack's Kafka, which the stack's pagos then opens. The stack makes its key pair at its
  first start (``local_stack.payment_token_keys``).
"""

from __future__ import annotations

import os
from decimal import Decimal
from functools import cache
from pathlib import Path

from saga_contracts.sealing import (
    Binding,
    OpeningKeys,
    SealingKey,
    new_key_pair,
    parse_opening_keys,
    parse_sealing_key,
)
from saga_harness.config import ROOT

TEST_KEY_ID = "test"
TEST_CUSTOMER = "cust-test"
"""The customer of the tests' charges, unless they name one."""


def charge(*, saga_id: str, order_id: str, amount: Decimal | str = "10.00",
           currency: str = "USD", customer_id: str = TEST_CUSTOMER) -> Binding:
    """The charge a token is sealed for."""
    return Binding.of(saga_id=saga_id, order_id=order_id, customer_id=customer_id,
                      amount=Decimal(amount), currency=currency)


@cache
def opening_keys() -> OpeningKeys:
    """The private half of this process's test key, as pagos holds its keys."""
    private, _ = new_key_pair(TEST_KEY_ID)
    return parse_opening_keys(private)


def sealing_key() -> SealingKey:
    """The public half of this process's test key, as pedidos seals with it."""
    return opening_keys().sealing_key(TEST_KEY_ID)


def sealed(token: str, for_charge: Binding) -> str:
    """``token`` sealed for ``for_charge`` with this process's test key."""
    return sealing_key().seal(token, for_charge)


def stack_key_file() -> Path:
    state = Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local"))
    return state / "secrets" / "payment-token-seal.pub"


def stack_sealed(token: str, for_charge: Binding) -> str:
    """``token`` sealed for ``for_charge`` with the running stack's key, as its pedidos
    seals."""
    path = stack_key_file()
    if not path.exists():
        raise FileNotFoundError(f"no payment token key at {path}: is the local stack up?")
    return parse_sealing_key(path.read_text()).seal(token, for_charge)

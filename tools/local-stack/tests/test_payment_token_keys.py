"""The stack's payment token key pair: made once at first start, private to its owner, the public
half pedidos', the private half pagos', handed to each as a file and to no other service."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from local_stack import payment_token_keys, secrets
from saga_contracts.sealing import Binding, parse_opening_keys, parse_sealing_key

ORDER = "9b1f4c1e-8f57-4a43-9d6a-0b1b8c9f3e11"
CHARGE = Binding(saga_id=ORDER, order_id=ORDER, customer_id="c-1", currency="USD",
                 amount_minor=100)


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    return tmp_path / "secrets"


def test_the_pair_is_made_once_and_its_halves_match() -> None:
    private, public = payment_token_keys.key_files()
    assert (private.name, public.name) == ("payment-token-seal.key", "payment-token-seal.pub")
    for path in (private, public):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = (private.read_text(), public.read_text())
    assert payment_token_keys.key_files() == (private, public)
    assert (private.read_text(), public.read_text()) == first, "kept across starts"
    key = parse_sealing_key(public.read_text())
    keys = parse_opening_keys(private.read_text())
    assert keys.key_ids == (key.key_id,)
    assert keys.open(key.seal("tok_visa", CHARGE), CHARGE) == "tok_visa"


def test_pedidos_gets_the_public_key_pagos_the_private_one_inventario_nothing() -> None:
    private, public = payment_token_keys.key_files()
    assert payment_token_keys.service_env("pedidos") == {
        "PEDIDOS_PAYMENT_TOKEN_SEAL_KEY_FILE": str(public)}
    assert payment_token_keys.service_env("pagos") == {
        "PAGOS_PAYMENT_TOKEN_OPEN_KEYS_FILE": str(private)}
    assert payment_token_keys.service_env("inventario") == {}
    assert private.read_text().strip() not in str(payment_token_keys.service_env("pagos"))

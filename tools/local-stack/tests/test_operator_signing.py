"""The operator's replay-signing key: made once at the stack's first start, kept private, and
handed to the services as the public key that verifies what sagactl signs with the private one."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from local_stack import operator_signing, secrets
from local_stack.parts import service_env
from saga_contracts import replay_signature
from saga_contracts.replay_signature import OperatorKeys, Signed


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    return tmp_path / "secrets"


def test_the_key_is_made_once_and_its_public_half_verifies_its_signatures(
        _scratch: Path) -> None:
    listed = operator_signing.public_keys()
    assert operator_signing.public_keys() == listed
    private = replay_signature.load_private_key((_scratch / "operator-signing.key").read_bytes())
    record = Signed("inventario", "payment-events", b"saga", b"{}", "m", "saga")
    assert OperatorKeys.parse(listed).forgery(replay_signature.sign(private, record),
                                              record) is None
    assert stat.S_IMODE((_scratch / "operator-signing.key").stat().st_mode) == 0o600


def test_the_console_signs_with_a_key_of_its_own_that_the_services_believe(
        _scratch: Path) -> None:
    listed = OperatorKeys.parse(operator_signing.public_keys())
    console = replay_signature.load_private_key(operator_signing.console_key_file().read_bytes())
    sagactl = replay_signature.load_private_key((_scratch / "operator-signing.key").read_bytes())
    assert replay_signature.public_entry(console) != replay_signature.public_entry(sagactl)
    record = Signed("inventario", "payment-events", b"saga", b"{}", "m", "saga")
    assert listed.forgery(replay_signature.sign(console, record), record) is None
    assert stat.S_IMODE(operator_signing.console_key_file().stat().st_mode) == 0o600


def test_the_services_get_the_public_key_and_nothing_private() -> None:
    listed = service_env("inventario")["SAGA_OPERATOR_PUBLIC_KEYS"]
    assert listed == operator_signing.public_keys()
    assert "PRIVATE" not in listed

"""The fake gateway's secret key: made once at first start, private to the stack's owner, given
to the gateway and to pagos as the same file and to no other service, and what
`make credentials` prints."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from local_stack import credentials, gateway_key, parts, secrets


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    return tmp_path / "secrets"


def test_the_key_is_made_once_and_kept() -> None:
    path = gateway_key.key_file()
    assert path.name == "gateway-secret-key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = path.read_text()
    assert key.startswith("sk_test_") and len(key) >= 40
    assert gateway_key.key_file().read_text() == key, "kept across starts"
    assert credentials.credentials()["gateway"]["secret_key"] == key


def test_the_gateway_and_pagos_get_the_file_and_no_other_service_anything() -> None:
    path = str(gateway_key.key_file())
    assert gateway_key.gateway_env() == {"GATEWAY_SECRET_KEY_FILE": path}
    assert gateway_key.service_env("pagos") == {"PAGOS_GATEWAY_SECRET_KEY_FILE": path}
    assert gateway_key.service_env("pedidos") == gateway_key.service_env("inventario") == {}
    [gateway] = [p for p in parts.py_parts() if p.name == "gateway"]
    assert gateway.env["GATEWAY_SECRET_KEY_FILE"] == path
    key = Path(path).read_text()
    for part in parts.py_parts():
        assert key not in str(part.env), f"{part.name} got the key itself in its environment"

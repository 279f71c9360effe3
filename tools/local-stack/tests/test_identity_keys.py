"""The local identity provider's signing key: made once at the stack's first start, private to
its owner, published with the previous one during a rotation; and the services trust the
issuer the provider says it is."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from identity_provider.keys import SigningKey
from identity_provider.settings import IdentityProviderSettings
from local_stack import identity, secrets
from local_stack.parts import service_env


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    return tmp_path / "secrets"


def test_the_key_is_made_once_and_kept_private(_scratch: Path) -> None:
    env = identity.provider_env()
    key_file = Path(env["IDENTITY_SIGNING_KEY_FILE"])
    assert key_file.parent == _scratch
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    kid = SigningKey.from_file(key_file).kid
    assert identity.provider_env() == env
    assert SigningKey.from_file(key_file).kid == kid
    assert env["IDENTITY_PUBLISHED_KEY_FILES"] == ""


def test_a_rotated_out_key_stays_published(_scratch: Path) -> None:
    old = Path(identity.provider_env()["IDENTITY_SIGNING_KEY_FILE"])
    old_kid = SigningKey.from_file(old).kid
    old.rename(_scratch / identity.PREVIOUS)  # the rotation the module's docstring describes
    env = identity.provider_env()
    assert SigningKey.from_file(Path(env["IDENTITY_SIGNING_KEY_FILE"])).kid != old_kid
    assert env["IDENTITY_PUBLISHED_KEY_FILES"] == str(_scratch / identity.PREVIOUS)


def test_every_service_trusts_the_issuer_the_provider_is(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in identity.provider_env().items():
        monkeypatch.setenv(name, value)
    provider = IdentityProviderSettings()  # type: ignore[call-arg]
    for service in ("pedidos", "inventario", "pagos"):
        env = service_env(service)
        assert env["AUTH_ISSUER"] == provider.issuer_url
        assert env["AUTH_AUDIENCE"] == provider.audience

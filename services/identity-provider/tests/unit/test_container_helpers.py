"""The two helpers docker-compose.yml runs in the identity provider's image: the signing key
made once into a volume, and a token asked of the running provider (Prometheus' scrape token)."""

from __future__ import annotations

import stat
from pathlib import Path

import jwt
import pytest

from identity_provider import request_token, signing_key_file
from identity_provider.app import create_app
from identity_provider.keys import SigningKey, new_private_key_pem
from identity_provider.settings import IdentityProviderSettings
from saga_harness.served import free_socket, served


def test_the_key_is_made_once_private_and_then_kept(tmp_path: Path) -> None:
    path = tmp_path / "identity-signing.key"
    assert signing_key_file.ensure(path) is True
    first = path.read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    SigningKey.from_pem(first)
    assert signing_key_file.ensure(path) is False
    assert path.read_bytes() == first
    assert signing_key_file.main([str(path)]) == 0
    assert path.read_bytes() == first


def test_a_file_that_is_not_a_key_is_refused_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "identity-signing.key"
    path.write_text("not a key")
    with pytest.raises(SystemExit):
        signing_key_file.ensure(path)
    assert path.read_text() == "not a key"


def test_a_token_asked_by_another_url_carries_the_providers_own_issuer(
        tmp_path: Path) -> None:
    """docker compose: the host asks 127.0.0.1:8020, the containers trust
    http://identity-provider:8020; the token names the latter whichever URL asked for it."""
    key = tmp_path / "k"
    key.write_bytes(new_private_key_pem())
    sock = free_socket()
    config = IdentityProviderSettings(port=sock.getsockname()[1], signing_key_file=key,
                                      issuer="http://identity-provider:8020")
    out = tmp_path / "scrape-token"
    with served(create_app(config), sock, lifespan="off") as base:
        printed = request_token.request_token(base, "prometheus", ["operator"], 600)
        assert request_token.main([base, "prometheus", "operator", "--expires-in", "600",
                                   "--out", str(out), "--mode", "644"]) == 0
    for token in (printed, out.read_text()):
        claims = jwt.decode(token, options={"verify_signature": False})
        assert claims["iss"] == "http://identity-provider:8020"
        assert claims["sub"] == "prometheus" and claims["roles"] == ["operator"]
        assert claims["exp"] - claims["iat"] == 600
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert not out.with_name(out.name + ".partial").exists()


def test_no_provider_is_a_failure_not_an_empty_token(tmp_path: Path) -> None:
    sock = free_socket()  # bound, never listening: the connection is refused
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    out = tmp_path / "scrape-token"
    try:
        assert request_token.main([base, "prometheus", "operator", "--out", str(out)]) == 1
    finally:
        sock.close()
    assert not out.exists()

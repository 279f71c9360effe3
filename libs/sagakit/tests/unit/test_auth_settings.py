"""The issuer's keys decide who is an operator, so they are fetched over TLS: a plain-HTTP issuer
is taken only on the loopback or when asked for by name; and only asymmetric algorithms."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sagakit.auth import AuthSettings


@pytest.mark.parametrize("issuer", ["https://idp.example/realms/saga", "http://127.0.0.1:8020",
                                    "http://localhost:8020", "http://[::1]:8020"])
def test_a_tls_or_loopback_issuer_is_taken(issuer: str) -> None:
    assert AuthSettings(issuer=issuer).issuer == issuer


@pytest.mark.parametrize("issuer", ["http://idp.example", "http://10.0.0.5:8020",
                                    "http://identity-provider:8020"])
def test_a_plain_http_issuer_elsewhere_is_refused(issuer: str) -> None:
    with pytest.raises(ValidationError, match="plain HTTP"):
        AuthSettings(issuer=issuer)


def test_a_development_network_may_ask_for_plain_http_by_name() -> None:
    settings = AuthSettings(issuer="http://identity-provider:8020", insecure_http_issuer=True)
    assert settings.discovery_url == \
        "http://identity-provider:8020/.well-known/openid-configuration"


@pytest.mark.parametrize("algorithms", ["none", "HS256", "RS256,HS256"])
def test_symmetric_or_no_signature_is_refused(algorithms: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTH_ALGORITHMS", algorithms)
    with pytest.raises(ValidationError, match="asymmetric"):
        AuthSettings()

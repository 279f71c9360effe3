"""The identity provider run public-only (IDENTITY_PUBLIC_ONLY), where the services reach it:
it publishes its discovery document and JWKS, which check the tokens the full instance (the
same key) hands out, and hands out nothing itself: no token, no sign-in form."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import httpx
import pytest

from identity_provider.app import create_app
from identity_provider.keys import new_private_key_pem
from identity_provider.settings import IdentityProviderSettings
from saga_harness.served import free_socket, served
from sagakit.auth import AuthSettings, TokenVerifier

ISSUER = "http://identity-provider:8020"
SIGNIN = "http://identity-signin:8020"


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "signing.key"
    path.write_bytes(new_private_key_pem())
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return path


def client(settings: IdentityProviderSettings) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings)),
                             base_url="http://idp")


async def test_public_only_hands_out_no_token_and_no_sign_in_form(key: Path) -> None:
    settings = IdentityProviderSettings(signing_key_file=key, issuer=ISSUER, public_only=True,
                                        signin_url=SIGNIN)
    async with client(settings) as http:
        assert (await http.post("/token", json={"sub": "x", "roles": ["operator"]})
                ).status_code in (404, 405)
        assert (await http.post("/token", data={"grant_type": "authorization_code"})
                ).status_code in (404, 405)
        assert (await http.get("/authorize", params={"response_type": "code"})
                ).status_code == 404
        assert (await http.get("/health")).status_code == 200
        discovery = (await http.get("/.well-known/openid-configuration")).json()
        assert (await http.get("/.well-known/jwks.json")).json()["keys"]
    assert discovery["issuer"] == ISSUER
    assert discovery["jwks_uri"] == f"{ISSUER}/.well-known/jwks.json"
    # The console finds the full instance's endpoints here.
    assert discovery["token_endpoint"] == f"{SIGNIN}/token"
    assert discovery["authorization_endpoint"] == f"{SIGNIN}/authorize"


async def test_the_full_instance_still_hands_out_tokens(key: Path) -> None:
    async with client(IdentityProviderSettings(signing_key_file=key, issuer=ISSUER)) as http:
        answer = await http.post("/token", json={"sub": "x", "roles": ["customer"]})
        discovery = (await http.get("/.well-known/openid-configuration")).json()
    assert answer.status_code == 200
    assert discovery["token_endpoint"] == f"{ISSUER}/token"


async def test_a_token_of_the_full_instance_checks_against_the_public_one(key: Path) -> None:
    """Both served for real, the services' verifier pointed at the public one."""
    public_sock, full_sock = free_socket(), free_socket()
    public_url = f"http://127.0.0.1:{public_sock.getsockname()[1]}"
    public = IdentityProviderSettings(signing_key_file=key, issuer=public_url, public_only=True)
    full = IdentityProviderSettings(signing_key_file=key, issuer=public_url)
    with (served(create_app(public), public_sock, lifespan="off"),
          served(create_app(full), full_sock, lifespan="off") as signin):
        async with httpx.AsyncClient() as http:
            answer = (await http.post(f"{signin}/token",
                                      json={"sub": "op-1", "roles": ["operator"]})).json()
        verifier = TokenVerifier(AuthSettings(issuer=public_url, audience="saga"))
        try:
            principal = await verifier.verify(str(answer["access_token"]))
        finally:
            await verifier.close()
    assert principal.subject == "op-1" and principal.roles == {"operator"}

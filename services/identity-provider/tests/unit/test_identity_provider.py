"""The identity provider's tokens, checked as the services check them (sagakit.auth, over real
HTTP): what it hands out, what it publishes, and a key rotation that keeps every token valid."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import jwt
import pytest

from identity_provider.app import create_app
from identity_provider.keys import KeyRing, SigningKey, new_private_key_pem
from identity_provider.settings import IdentityProviderSettings
from saga_harness.served import free_socket, served
from sagakit.auth import AuthSettings, TokenVerifier

FIRST_PEM, SECOND_PEM = new_private_key_pem(), new_private_key_pem()


def key_file(tmp_path: Path, name: str, pem: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(pem)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return path


def settings(port: int, signing: Path, *published: Path) -> IdentityProviderSettings:
    return IdentityProviderSettings(port=port, signing_key_file=signing,
                                    published_key_files=published)


@pytest.fixture
async def verifier_for() -> AsyncIterator[list[TokenVerifier]]:
    made: list[TokenVerifier] = []
    yield made
    for verifier in made:
        await verifier.close()


def verifier(made: list[TokenVerifier], issuer: str) -> TokenVerifier:
    made.append(TokenVerifier(AuthSettings(issuer=issuer, audience="saga")))
    return made[-1]


async def token(http: httpx.AsyncClient, base: str, **body: object) -> dict[str, object]:
    r = await http.post(f"{base}/token", json=body)
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_token_it_hands_out_is_one_the_services_accept(
        tmp_path: Path, verifier_for: list[TokenVerifier]) -> None:
    sock = free_socket()
    config = settings(sock.getsockname()[1], key_file(tmp_path, "k", FIRST_PEM))
    with served(create_app(config), sock, lifespan="off") as base:
        async with httpx.AsyncClient() as http:
            answer = await token(http, base, sub="cust-5", roles=["customer"])
            discovery = (await http.get(f"{base}/.well-known/openid-configuration")).json()
        assert answer["token_type"] == "Bearer" and answer["expires_in"] == 900
        assert discovery["issuer"] == base
        # An access token as RFC 9068 types it: the services refuse any other typ.
        assert jwt.get_unverified_header(str(answer["access_token"]))["typ"] == "at+jwt"
        principal = await verifier(verifier_for, base).verify(str(answer["access_token"]))
    assert principal.subject == "cust-5" and principal.roles == {"customer"}


async def test_a_key_rotated_in_signs_and_the_key_it_replaced_still_verifies(
        tmp_path: Path, verifier_for: list[TokenVerifier]) -> None:
    first, second = key_file(tmp_path, "first", FIRST_PEM), key_file(tmp_path, "second", SECOND_PEM)
    sock = free_socket()
    port = sock.getsockname()[1]
    async with httpx.AsyncClient() as http:
        with served(create_app(settings(port, first)), sock, lifespan="off") as base:
            old = str((await token(http, base, sub="ops", roles=["operator"]))["access_token"])
            services = verifier(verifier_for, base)
            assert (await services.verify(old)).is_operator
        # The rotation: restarted with the new key signing and the old one still published.
        with served(create_app(settings(port, second, first)), free_socket(port),
                    lifespan="off") as base:
            new = str((await token(http, base, sub="ops", roles=["operator"]))["access_token"])
            jwks = (await http.get(f"{base}/.well-known/jwks.json")).json()
            assert jwt.get_unverified_header(new)["kid"] != jwt.get_unverified_header(old)["kid"]
            assert (await services.verify(new)).is_operator
            assert (await services.verify(old)).is_operator
    assert [k["kid"] for k in jwks["keys"]] == [SigningKey.from_pem(SECOND_PEM).kid,
                                                SigningKey.from_pem(FIRST_PEM).kid]


def test_a_key_keeps_its_id_across_restarts() -> None:
    assert SigningKey.from_pem(FIRST_PEM).kid == SigningKey.from_pem(FIRST_PEM).kid
    assert SigningKey.from_pem(FIRST_PEM).kid != SigningKey.from_pem(SECOND_PEM).kid


def test_the_jwks_publishes_public_keys_only() -> None:
    ring = KeyRing(SigningKey.from_pem(FIRST_PEM), (SigningKey.from_pem(SECOND_PEM),))
    for key in ring.jwks()["keys"]:
        assert key["kty"] == "RSA" and key["alg"] == "RS256" and key["use"] == "sig"
        assert not {"d", "p", "q", "dp", "dq", "qi"} & set(key)


@pytest.mark.parametrize("body", [
    {"sub": "x", "roles": ["admin"]},
    {"sub": "x", "roles": []},
    {"sub": "", "roles": ["customer"]},
    {"sub": "x", "roles": ["customer"], "expires_in": 0},
    {"sub": "x", "roles": ["customer"], "scope": "everything"},
])
async def test_a_request_it_cannot_honour_is_a_422(tmp_path: Path, body: dict[str, object]) -> None:
    app = create_app(settings(8020, key_file(tmp_path, "k", FIRST_PEM)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://idp") as http:
        assert (await http.post("/token", json=body)).status_code == 422


async def test_a_subject_with_a_lone_surrogate_is_a_422(tmp_path: Path) -> None:
    app = create_app(settings(8020, key_file(tmp_path, "k", FIRST_PEM)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://idp") as http:
        # Only the raw JSON can hold it: "\\ud800" is valid JSON, not valid UTF-8.
        r = await http.post("/token", content=b'{"sub": "x\\ud800", "roles": ["customer"]}',
                            headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "sub"]


async def test_a_lifetime_asked_for_is_given_up_to_the_limit(tmp_path: Path) -> None:
    config = IdentityProviderSettings(signing_key_file=key_file(tmp_path, "k", FIRST_PEM),
                                      max_token_lifetime_s=3600)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(config)),
                                 base_url="http://idp") as http:
        short = await token(http, "", sub="p", roles=["operator"], expires_in=60)
        long = await token(http, "", sub="p", roles=["operator"], expires_in=10**9)
    assert short["expires_in"] == 60 and long["expires_in"] == 3600
    claims = jwt.decode(str(long["access_token"]), options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 3600

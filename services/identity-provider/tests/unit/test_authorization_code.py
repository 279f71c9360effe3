"""The browser sign-in: the authorization-code flow with PKCE, as a client library drives it
(the form-encoded token request), beside the provider's JSON ``POST /token``."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest

from identity_provider.app import create_app
from identity_provider.authorization import CodeStore, check_request, s256
from identity_provider.keys import new_private_key_pem
from identity_provider.settings import IdentityProviderSettings

CALLBACK = "http://127.0.0.1:8030/auth/callback"
VERIFIER = secrets.token_urlsafe(48)


@pytest.fixture
def idp(tmp_path: Path) -> httpx.AsyncClient:
    key = tmp_path / "k"
    key.write_bytes(new_private_key_pem())
    os.chmod(key, stat.S_IRUSR | stat.S_IWUSR)
    app = create_app(IdentityProviderSettings(signing_key_file=key))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://idp")


def authorize_params(**overrides: str) -> dict[str, str]:
    return {"response_type": "code", "client_id": "consola", "redirect_uri": CALLBACK,
            "code_challenge": s256(VERIFIER), "code_challenge_method": "S256",
            "state": "st-1", **overrides}


async def signed_in_code(idp: httpx.AsyncClient, role: str = "operator") -> str:
    form = await idp.get("/authorize", params=authorize_params())
    assert form.status_code == 200 and 'name="subject"' in form.text
    back = await idp.post("/authorize", data={**authorize_params(), "subject": "ana",
                                              "role": role})
    assert back.status_code == 303, back.text
    location = urlsplit(back.headers["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == CALLBACK
    query = parse_qs(location.query)
    assert query["state"] == ["st-1"]
    return query["code"][0]


def trade(code: str, **overrides: str) -> dict[str, str]:
    return {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK,
            "client_id": "consola", "code_verifier": VERIFIER, **overrides}


async def test_a_browser_signs_in_and_the_client_trades_the_code_for_a_token(
        idp: httpx.AsyncClient) -> None:
    code = await signed_in_code(idp)
    answer = await idp.post("/token", data=trade(code))
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    body = answer.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 900
    claims = jwt.decode(body["access_token"], options={"verify_signature": False})
    assert claims["sub"] == "ana" and claims["roles"] == ["operator"]
    assert claims["aud"] == "saga" and claims["iss"] == "http://127.0.0.1:8020"


async def test_a_code_is_good_once(idp: httpx.AsyncClient) -> None:
    code = await signed_in_code(idp)
    assert (await idp.post("/token", data=trade(code))).status_code == 200
    again = await idp.post("/token", data=trade(code))
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


@pytest.mark.parametrize("wrong", [
    {"code_verifier": secrets.token_urlsafe(48)},
    {"client_id": "another"},
    {"redirect_uri": "http://127.0.0.1:9999/elsewhere"},
])
async def test_a_code_with_another_verifier_client_or_redirect_is_refused_and_spent(
        idp: httpx.AsyncClient, wrong: dict[str, str]) -> None:
    code = await signed_in_code(idp)
    refused = await idp.post("/token", data=trade(code, **wrong))
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
    assert (await idp.post("/token", data=trade(code))).status_code == 400


async def test_only_the_authorization_code_grant_is_taken_as_a_form(
        idp: httpx.AsyncClient) -> None:
    refused = await idp.post("/token", data={"grant_type": "client_credentials"})
    assert refused.status_code == 400 and refused.json()["error"] == "unsupported_grant_type"


async def test_the_json_token_request_is_unchanged(idp: httpx.AsyncClient) -> None:
    answer = await idp.post("/token", json={"sub": "c-42", "roles": ["customer"]})
    assert answer.status_code == 200 and set(answer.json()) == {
        "access_token", "token_type", "expires_in"}
    assert (await idp.post("/token", json={"sub": "c-42", "roles": ["admin"]})).status_code == 422


async def test_the_discovery_document_advertises_the_flow(idp: httpx.AsyncClient) -> None:
    doc = (await idp.get("/.well-known/openid-configuration")).json()
    assert doc["authorization_endpoint"] == "http://127.0.0.1:8020/authorize"
    assert doc["code_challenge_methods_supported"] == ["S256"]
    assert "authorization_code" in doc["grant_types_supported"]


async def test_an_unknown_redirect_uri_is_told_to_the_person_not_redirected_to(
        idp: httpx.AsyncClient) -> None:
    refused = await idp.get("/authorize", params=authorize_params(
        redirect_uri="https://attacker.example/cb"))
    assert refused.status_code == 400 and "location" not in refused.headers


@pytest.mark.parametrize("uri", ["http://evil.example@127.0.0.1:8030/cb",
                                 "http://evil.example\\@127.0.0.1:8030/cb",
                                 "http://someone@localhost:8030/cb"])
async def test_a_loopback_redirect_uri_with_a_user_part_is_refused(
        idp: httpx.AsyncClient, uri: str) -> None:
    refused = await idp.get("/authorize", params=authorize_params(redirect_uri=uri))
    assert refused.status_code == 400 and "location" not in refused.headers


async def test_a_state_scope_or_client_id_past_its_length_is_refused_and_not_echoed(
        idp: httpx.AsyncClient) -> None:
    for field in ("state", "scope"):
        refused = await idp.get("/authorize", params=authorize_params(**{field: "x" * 513}))
        assert refused.status_code == 303, field
        query = parse_qs(urlsplit(refused.headers["location"]).query)
        assert query["error"] == ["invalid_request"]
        assert "x" * 513 not in refused.headers["location"]
    refused = await idp.get("/authorize", params=authorize_params(client_id="c" * 513))
    assert refused.status_code in (303, 400) and "c" * 513 not in refused.headers.get(
        "location", "")


async def test_a_request_without_pkce_goes_back_to_the_client_with_an_error(
        idp: httpx.AsyncClient) -> None:
    refused = await idp.get("/authorize", params=authorize_params(code_challenge_method="plain"))
    assert refused.status_code == 303
    query = parse_qs(urlsplit(refused.headers["location"]).query)
    assert query["error"] == ["invalid_request"] and query["state"] == ["st-1"]


async def test_a_subject_or_role_the_form_cannot_take_shows_the_form_again(
        idp: httpx.AsyncClient) -> None:
    bad_role = await idp.post("/authorize", data={**authorize_params(), "subject": "ana",
                                                  "role": "admin"})
    assert bad_role.status_code == 422 and 'name="subject"' in bad_role.text
    long = await idp.post("/authorize", data={**authorize_params(), "subject": "x" * 101,
                                              "role": "operator"})
    assert long.status_code == 422


def test_a_code_expires_after_a_minute() -> None:
    now = [0.0]
    store = CodeStore(clock=lambda: now[0])
    request = check_request(registered_uris=(), scope=None, **authorize_params())
    code = store.issue(request, "ana", ["operator"])
    now[0] = 61.0
    with pytest.raises(Exception, match="expired"):
        store.redeem(code=code, client_id="consola", redirect_uri=CALLBACK,
                     code_verifier=VERIFIER)


def test_configured_redirect_uris_are_the_only_ones() -> None:
    with pytest.raises(Exception, match="redirect_uri"):
        check_request(registered_uris=("http://console.example/cb",), scope=None,
                      **authorize_params())

"""Signing in to the console through the issuer (the identity provider, served for real), as a
browser does it, without a browser: the redirects followed by hand, the forms posted. Only
operators are let in; the session cookie is HttpOnly and SameSite; every form POST needs the
session's CSRF token; signing out ends the session."""

from __future__ import annotations

import os
import re
import stat
import uuid
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import httpx
import pytest

from consola.entrypoints.http import create_app
from consola.settings import ConsolaSettings
from identity_provider.app import create_app as identity_provider
from identity_provider.keys import new_private_key_pem
from identity_provider.settings import IdentityProviderSettings
from saga_harness.served import free_socket, served
from sagakit.auth import AuthSettings

# Signing in reads no view: a URL nothing listens on.
NO_DATABASE = "postgresql://console_reader@127.0.0.1:9/saga"


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The identity provider and the console, each on a port of its own: (idp, console)."""
    key = tmp_path_factory.mktemp("idp") / "signing.key"
    key.write_bytes(new_private_key_pem())
    os.chmod(key, stat.S_IRUSR | stat.S_IWUSR)
    idp_sock, console_sock = free_socket(), free_socket()
    idp_port, console_port = idp_sock.getsockname()[1], console_sock.getsockname()[1]
    idp = identity_provider(IdentityProviderSettings(port=idp_port, signing_key_file=key))
    console = create_app(
        ConsolaSettings(port=console_port, session_secret="s" * 40, database_url=NO_DATABASE,
                        pedidos_url="http://127.0.0.1:9", pagos_url="http://127.0.0.1:9"),
        AuthSettings(issuer=f"http://127.0.0.1:{idp_port}", audience="saga"))
    with served(idp, idp_sock) as idp_url, served(console, console_sock) as console_url:
        yield idp_url, console_url


def hidden_fields(html: str) -> dict[str, str]:
    return {m[0]: unescape(m[1]) for m in re.findall(
        r'<input type="hidden" name="([^"]+)" value="([^"]*)">', html)}


async def sign_in(http: httpx.AsyncClient, console: str, subject: str, role: str,
                  start: str = "/") -> httpx.Response:
    """From a page of the console to what the console answers the issuer's redirect back."""
    first = await http.get(f"{console}{start}")
    assert first.status_code == 303 and first.headers["location"] == "/login"
    to_issuer = await http.get(f"{console}/login")
    assert to_issuer.status_code == 302
    form = await http.get(to_issuer.headers["location"])
    assert form.status_code == 200 and "Sign in" in form.text
    fields = hidden_fields(form.text)
    assert fields["code_challenge_method"] == "S256" and fields["client_id"] == "consola"
    back = await http.post(to_issuer.headers["location"].split("?")[0],
                           data={**fields, "subject": subject, "role": role})
    assert back.status_code == 303
    assert back.headers["location"].startswith(f"{console}/auth/callback?")
    return await http.get(back.headers["location"])


async def test_an_operator_signs_in_and_lands_on_the_page_it_asked_for(
        stand_ins: tuple[str, str]) -> None:
    _, console = stand_ins
    wanted = f"/search?q={uuid.uuid4()}"
    async with httpx.AsyncClient() as http:
        landed = await sign_in(http, console, "ana", "operator", start=wanted)
        assert landed.status_code == 303 and landed.headers["location"] == wanted
        home = await http.get(f"{console}/sagas")
    assert home.status_code == 200 and 'id="operator">ana<' in home.text
    cookie = landed.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie
    assert "script-src" not in home.headers["content-security-policy"]
    assert "default-src 'none'" in home.headers["content-security-policy"]


async def test_a_customer_is_refused_with_a_403_page(stand_ins: tuple[str, str]) -> None:
    _, console = stand_ins
    async with httpx.AsyncClient() as http:
        refused = await sign_in(http, console, "c-42", "customer")
        assert refused.status_code == 403 and "Operators only" in refused.text
        assert 'id="refused-subject">c-42<' in refused.text
        # Nothing of the customer's sign-in was kept: the console asks for a sign-in again.
        assert (await http.get(f"{console}/sagas")).status_code == 303


async def test_sign_out_needs_the_sessions_csrf_token_and_ends_the_session(
        stand_ins: tuple[str, str]) -> None:
    _, console = stand_ins
    async with httpx.AsyncClient() as http:
        await sign_in(http, console, "ana", "operator")
        home = await http.get(f"{console}/sagas")
        csrf = hidden_fields(home.text)["csrf_token"]
        for forged in ({}, {"csrf_token": "not-the-token"}):
            refused = await http.post(f"{console}/logout", data=forged)
            assert refused.status_code == 403 and "Form refused" in refused.text
        assert (await http.get(f"{console}/sagas")).status_code == 200
        out = await http.post(f"{console}/logout", data={"csrf_token": csrf})
        assert out.status_code == 303 and out.headers["location"] == "/signed-out"
        assert (await http.get(f"{console}/sagas")).status_code == 303


async def test_a_callback_without_the_sign_ins_state_is_refused(
        stand_ins: tuple[str, str]) -> None:
    _, console = stand_ins
    async with httpx.AsyncClient() as http:
        forged = await http.get(f"{console}/auth/callback?code=abc&state=made-up")
    assert forged.status_code == 400 and "Sign-in failed" in forged.text


async def test_the_session_cookie_does_not_show_the_operators_token(
        stand_ins: tuple[str, str]) -> None:
    """Browsers send a cookie of 127.0.0.1 to every port of it: a copied cookie must not be a
    bearer token for the services' APIs."""
    import base64
    _, console = stand_ins
    async with httpx.AsyncClient() as http:
        await sign_in(http, console, "ana", "operator")
        cookie = http.cookies["consola_session"]
    payload = cookie.split(".")[0]
    readable = base64.b64decode(payload + "=" * (-len(payload) % 4)).decode()
    assert '"token"' in readable and "eyJ" not in readable, readable


async def test_a_callback_error_never_shows_the_links_own_text(
        stand_ins: tuple[str, str]) -> None:
    _, console = stand_ins
    async with httpx.AsyncClient() as http:
        lure = await http.get(f"{console}/auth/callback", params={
            "error": "Session expired", "error_description": "Call security at +1-555-0100"})
        denied = await http.get(f"{console}/auth/callback", params={"error": "access_denied"})
    assert lure.status_code == 400 and "555" not in lure.text and "Session expired" not in lure.text
    assert denied.status_code == 400 and "access_denied" in denied.text


async def test_a_forged_session_cookie_is_not_a_session(stand_ins: tuple[str, str]) -> None:
    _, console = stand_ins
    async with httpx.AsyncClient(cookies={"consola_session": "e30=.forged.sig"}) as http:
        assert (await http.get(f"{console}/sagas")).status_code == 303


def test_the_session_secret_is_required_and_long(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one of"):
        ConsolaSettings(database_url=NO_DATABASE)
    with pytest.raises(ValueError, match="32 characters"):
        ConsolaSettings(session_secret="short", database_url=NO_DATABASE)
    key = tmp_path / "key"
    key.write_text("k" * 48 + "\n")
    assert ConsolaSettings(session_secret_file=key,
                           database_url=NO_DATABASE).session_key() == "k" * 48


def test_the_read_views_url_is_required() -> None:
    with pytest.raises(ValueError, match="database_url"):
        ConsolaSettings(session_secret="s" * 40)


@pytest.mark.parametrize(("asked", "goes"), [
    ("/sagas/x", "/sagas/x"), ("//evil.example/x", "/"), ("https://evil.example", "/"),
    ("/\\evil", "/"), ("/\t/evil.example", "/"), (None, "/")])
def test_after_sign_in_only_a_page_of_the_console(asked: str | None, goes: str) -> None:
    from consola.entrypoints.session import safe_next
    assert safe_next(asked) == goes


@pytest.mark.parametrize("action", [
    f"/payments/{uuid.uuid4()}/resolution", f"/dead-letters/pagos/{uuid.uuid4()}/archive"])
async def test_an_action_needs_the_sessions_csrf_token(
        stand_ins: tuple[str, str], action: str) -> None:
    _, console = stand_ins
    async with httpx.AsyncClient() as http:
        await sign_in(http, console, "ana", "operator")
        for forged in ({"reference": "R", "reason": "r"},
                       {"reference": "R", "reason": "r", "csrf_token": "not-the-token"}):
            refused = await http.post(f"{console}{action}", data=forged)
            assert refused.status_code == 403 and "Form refused" in refused.text


async def test_a_database_the_console_cannot_read_is_a_502_page_without_its_url(
        stand_ins: tuple[str, str]) -> None:
    _, console = stand_ins
    async with httpx.AsyncClient() as http:
        await sign_in(http, console, "ana", "operator")
        for page in ("/", "/payments", "/dead-letters"):
            answer = await http.get(f"{console}{page}")
            assert answer.status_code == 502 and "the read views did not answer" in answer.text
            assert "console_reader" not in answer.text and "127.0.0.1:9" not in answer.text

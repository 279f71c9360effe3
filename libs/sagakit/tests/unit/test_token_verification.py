"""Tokens checked against an issuer's published keys, fetched over real HTTP: what is accepted,
what is refused and why, and what key rotation and made-up key ids cost the issuer."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from pydantic import ValidationError

from sagakit.auth import AuthSettings, InvalidToken, IssuerUnavailable, Principal, TokenVerifier
from sagakit.auth.issuer_keys import IssuerKeys

from .issuer_fakes import AUDIENCE, Issuer, SigningKey, running_issuer

KEY = SigningKey.new()
NEXT_KEY = SigningKey.new()


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with running_issuer(KEY) as issuer:
        yield issuer


def settings_for(issuer: Issuer, **overrides: object) -> AuthSettings:
    return AuthSettings(issuer=issuer.url, audience=AUDIENCE, **overrides)  # type: ignore[arg-type]


@pytest.fixture
async def verifier(issuer: Issuer) -> AsyncIterator[TokenVerifier]:
    verifier = TokenVerifier(settings_for(issuer))
    yield verifier
    await verifier.close()


async def refused(verifier: TokenVerifier, token: str) -> str:
    with pytest.raises(InvalidToken) as caught:
        await verifier.verify(token)
    assert not token or token not in str(caught.value)
    return str(caught.value)


async def test_a_valid_token_names_its_subject_and_roles(issuer: Issuer,
                                                         verifier: TokenVerifier) -> None:
    principal = await verifier.verify(issuer.token(sub="cust-42", roles=["customer"]))
    assert principal == Principal("cust-42", frozenset({"customer"}))
    assert not principal.is_operator and principal.owner_filter() == "cust-42"
    operator = await verifier.verify(issuer.token(sub="ops", roles=["operator"]))
    assert operator.is_operator and operator.owner_filter() is None


async def test_the_keys_are_fetched_once_for_many_tokens(issuer: Issuer,
                                                        verifier: TokenVerifier) -> None:
    await asyncio.gather(*(verifier.verify(issuer.token()) for _ in range(20)))
    assert issuer.jwks_fetches() == 1


async def test_an_expired_token_is_refused(issuer: Issuer, verifier: TokenVerifier) -> None:
    past = int(time.time()) - 3600
    assert await refused(verifier, issuer.token(iat=past - 300, exp=past)) == "expired"


async def test_expiry_is_judged_with_the_leeway(issuer: Issuer) -> None:
    just_expired = int(time.time()) - 5
    token = issuer.token(iat=just_expired - 300, exp=just_expired)
    lenient = TokenVerifier(settings_for(issuer, leeway_s=30))
    strict = TokenVerifier(settings_for(issuer, leeway_s=0))
    try:
        assert (await lenient.verify(token)).subject == "cust-1"
        assert await refused(strict, token) == "expired"
    finally:
        await lenient.close()
        await strict.close()


async def test_a_token_not_valid_yet_is_refused(issuer: Issuer, verifier: TokenVerifier) -> None:
    later = int(time.time()) + 3600
    assert await refused(verifier, issuer.token(nbf=later)) == "not valid yet"


async def test_a_token_for_another_audience_is_refused(issuer: Issuer,
                                                       verifier: TokenVerifier) -> None:
    assert await refused(verifier, issuer.token(aud="another-api")) == "wrong audience"


async def test_a_token_of_another_issuer_is_refused(issuer: Issuer,
                                                    verifier: TokenVerifier) -> None:
    assert await refused(verifier, issuer.token(iss="https://elsewhere.example")) == "wrong issuer"


@pytest.mark.parametrize("claim", ["exp", "sub", "aud", "iat"])
async def test_a_token_without_a_required_claim_is_refused(issuer: Issuer,
                                                           verifier: TokenVerifier,
                                                           claim: str) -> None:
    assert claim in await refused(verifier, issuer.token(**{claim: None}))


async def test_an_unsigned_token_is_refused(issuer: Issuer, verifier: TokenVerifier) -> None:
    now = int(time.time())
    token = jwt.encode({"iss": issuer.url, "aud": AUDIENCE, "sub": "cust-1",
                        "roles": ["operator"], "iat": now, "exp": now + 300}, None,
                       algorithm="none", headers={"kid": KEY.kid, "typ": "at+jwt"})
    assert "not accepted" in await refused(verifier, token)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


async def test_a_token_signed_with_the_public_key_as_an_hmac_secret_is_refused(
        issuer: Issuer, verifier: TokenVerifier) -> None:
    # The classic confusion: HS256 keyed with the issuer's public key, which anyone can read.
    public_pem = KEY.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    now = int(time.time())
    header = _b64(json.dumps({"alg": "HS256", "typ": "at+jwt", "kid": KEY.kid}).encode())
    payload = _b64(json.dumps({"iss": issuer.url, "aud": AUDIENCE, "sub": "cust-1",
                               "roles": ["operator"], "iat": now, "exp": now + 300}).encode())
    signature = _b64(hmac.new(public_pem, f"{header}.{payload}".encode(), hashlib.sha256).digest())
    assert "not accepted" in await refused(verifier, f"{header}.{payload}.{signature}")


async def test_a_tampered_token_is_refused(issuer: Issuer, verifier: TokenVerifier) -> None:
    header, payload, signature = issuer.token(sub="cust-1", roles=["customer"]).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    promoted = _b64(json.dumps({**claims, "roles": ["operator"]}).encode())
    assert await refused(verifier, f"{header}.{promoted}.{signature}") == "bad signature"
    flipped = signature[:-2] + ("AA" if not signature.endswith("AA") else "BB")
    assert await refused(verifier, f"{header}.{payload}.{flipped}") == "bad signature"


@pytest.mark.parametrize("garbage", ["", "not-a-jwt", "a.b.c", "x" * 20_000])
async def test_what_is_not_a_jwt_is_refused(verifier: TokenVerifier, garbage: str) -> None:
    await refused(verifier, garbage)


async def test_a_key_rotated_in_is_fetched_once_and_accepted(issuer: Issuer,
                                                             verifier: TokenVerifier) -> None:
    await verifier.verify(issuer.token(KEY))
    assert issuer.jwks_fetches() == 1
    issuer.keys = [NEXT_KEY, KEY]  # the issuer rotates: the new key signs, the old one lingers
    principal = await verifier.verify(issuer.token(NEXT_KEY, sub="cust-7"))
    assert principal.subject == "cust-7"
    assert issuer.jwks_fetches() == 2
    assert (await verifier.verify(issuer.token(KEY))).subject == "cust-1"
    assert issuer.jwks_fetches() == 2


async def test_a_key_the_issuer_does_not_publish_is_refused(issuer: Issuer,
                                                            verifier: TokenVerifier) -> None:
    stranger = SigningKey(KEY.kid, NEXT_KEY.private)  # a known key id, the wrong key
    assert await refused(verifier, issuer.token(stranger)) == "bad signature"
    unknown = SigningKey("never-published", NEXT_KEY.private)
    assert await refused(verifier, issuer.token(unknown)) == (
        "signed with a key the issuer does not publish")


async def test_made_up_key_ids_make_one_fetch_per_interval(issuer: Issuer) -> None:
    verifier = TokenVerifier(settings_for(issuer, unknown_key_refetch_s=60))
    try:
        await verifier.verify(issuer.token())
        flood = [issuer.token(SigningKey(uuid.uuid4().hex, KEY.private)) for _ in range(50)]
        for token in flood:
            await refused(verifier, token)
        # One fetch to start, one for the first unknown key id; the other 49 wait their turn.
        assert issuer.jwks_fetches() == 2
    finally:
        await verifier.close()


async def test_requests_that_find_an_unknown_key_share_one_fetch(issuer: Issuer,
                                                                 verifier: TokenVerifier) -> None:
    await verifier.verify(issuer.token(KEY))
    issuer.keys = [NEXT_KEY, KEY]
    principals = await asyncio.gather(*(verifier.verify(issuer.token(NEXT_KEY))
                                        for _ in range(10)))
    assert {p.subject for p in principals} == {"cust-1"}
    assert issuer.jwks_fetches() == 2


async def test_an_issuer_that_cannot_be_reached_is_unavailable_not_a_bad_token(
        issuer: Issuer, verifier: TokenVerifier) -> None:
    issuer.failing = True
    with pytest.raises(IssuerUnavailable):
        await verifier.verify(issuer.token())


async def test_keys_fetched_before_stay_in_use_while_the_issuer_is_down(issuer: Issuer) -> None:
    now = [0.0]
    settings = settings_for(issuer, keys_max_age_s=10)
    verifier = TokenVerifier(settings, IssuerKeys(settings, clock=lambda: now[0]))
    try:
        await verifier.verify(issuer.token())
        issuer.failing = True
        now[0] = 11.0  # the keys are due for a fetch, which fails
        assert (await verifier.verify(issuer.token())).subject == "cust-1"
        assert issuer.jwks_fetches() == 1
    finally:
        await verifier.close()


async def test_a_discovery_document_naming_another_issuer_is_not_believed(
        issuer: Issuer, verifier: TokenVerifier) -> None:
    issuer.named_issuer = "https://impostor.example"
    with pytest.raises(IssuerUnavailable):
        await verifier.verify(issuer.token())
    assert issuer.jwks_fetches() == 0


async def test_roles_may_sit_in_a_nested_claim(issuer: Issuer) -> None:
    verifier = TokenVerifier(settings_for(issuer, roles_claim="realm_access.roles"))
    try:
        token = issuer.token(roles=None, realm_access={"roles": ["operator", "offline"]})
        assert (await verifier.verify(token)).roles == {"operator", "offline"}
        assert (await verifier.verify(issuer.token(roles=["operator"]))).roles == frozenset()
    finally:
        await verifier.close()


@pytest.mark.parametrize("algorithms", ["none", "HS256", "RS256,HS512", ""])
def test_only_asymmetric_algorithms_may_be_configured(algorithms: str) -> None:
    with pytest.raises(ValidationError):
        AuthSettings(algorithms=algorithms)  # type: ignore[arg-type]


def test_algorithms_are_read_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTH_ALGORITHMS", "RS256, ES256")
    assert AuthSettings().algorithms == ("RS256", "ES256")


# ---- the token's type (RFC 9068): an ID token is not an access token


async def test_an_id_token_of_the_same_issuer_for_the_same_audience_is_refused(
        issuer: Issuer, verifier: TokenVerifier) -> None:
    """An OpenID Connect ID token: same keys, same issuer, its audience the client id (here
    the services' audience), a subject, even roles; its header says JWT, or nothing."""
    for typ in ("JWT", None, "id_token+jwt"):
        reason = await refused(verifier, issuer.token(sub="ops", roles=["operator"], typ=typ,
                                                      nonce="n-1", auth_time=int(time.time())))
        assert reason.startswith("not an access token")


async def test_an_access_token_is_recognised_by_either_spelling_of_its_type(
        issuer: Issuer, verifier: TokenVerifier) -> None:
    for typ in ("at+jwt", "application/at+jwt", "AT+JWT"):
        assert (await verifier.verify(issuer.token(typ=typ))).subject == "cust-1"


def test_the_accepted_token_types_are_read_comma_separated(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTH_TOKEN_TYPES", "at+JWT, application/at+jwt")
    assert AuthSettings().token_types == ("at+jwt", "application/at+jwt")
    monkeypatch.setenv("AUTH_TOKEN_TYPES", " , ")
    with pytest.raises(ValidationError):
        AuthSettings()


# ---- where the keys come from: the issuer's own origin


async def test_keys_published_at_another_origin_are_not_fetched(
        issuer: Issuer, verifier: TokenVerifier) -> None:
    """The discovery document sends the service to another server (another port here) that
    publishes the very keys the token is signed with: they are not fetched, nor believed."""
    with running_issuer(KEY) as elsewhere:
        issuer.jwks_uri = f"{elsewhere.url}/jwks"
        with pytest.raises(IssuerUnavailable):
            await verifier.verify(issuer.token())
        assert elsewhere.jwks_fetches() == 0


@pytest.mark.parametrize("elsewhere", [
    "http://attacker@127.0.0.1:{port}/jwks",   # a user in the URL
    "https://127.0.0.1:{port}/jwks",           # another scheme
    "file:///etc/passwd",
])
async def test_a_jwks_uri_that_is_not_plainly_the_issuers_is_not_fetched(
        issuer: Issuer, verifier: TokenVerifier, elsewhere: str) -> None:
    issuer.jwks_uri = elsewhere.format(port=issuer.url.rsplit(":", 1)[1])
    with pytest.raises(IssuerUnavailable):
        await verifier.verify(issuer.token())
    assert issuer.jwks_fetches() == 0


def test_a_jwks_uri_must_be_https_when_the_issuer_is() -> None:
    from sagakit.auth.issuer_keys import check_jwks_uri

    check_jwks_uri("https://id.example.com/keys", "https://id.example.com/realms/r")
    check_jwks_uri("https://ID.example.com:443/keys", "https://id.example.com")
    for bad in ("http://id.example.com/keys", "http://id.example.com:443/keys",
                "https://keys.example.com/keys", "https://id.example.com:8443/keys"):
        with pytest.raises(ValueError):
            check_jwks_uri(bad, "https://id.example.com/realms/r")

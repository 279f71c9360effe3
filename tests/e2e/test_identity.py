"""Who may do what, through the public interfaces only: every business endpoint refuses a
request without a valid token (401), a valid token without the role (403), and a customer's
request for another customer's order, saga or payment as if it did not exist (404); a token the
identity provider did not sign with a key it publishes, an expired one, one for another
audience or issuer, an unsigned or a tampered one are all 401. Tokens come from the stack's
identity provider (``POST /token``); the bad ones are made here, some with the provider's own
key (``.local/secrets``), to change one thing at a time."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from identity_provider.keys import SigningKey, new_private_key_pem
from saga_harness import config, identity
from saga_harness.clients import Saga, new_sku, order_body

ISSUER, AUDIENCE = config.IDENTITY, "saga"


@pytest.fixture
async def http(running_stack: None) -> AsyncIterator[httpx.AsyncClient]:
    """A client that sends only the credentials a test gives it."""
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


def customer() -> str:
    return f"cust-{uuid.uuid4().hex[:8]}"


def as_customer(customer_id: str) -> dict[str, str]:
    return identity.bearer(identity.customer_token(customer_id))


def as_operator() -> dict[str, str]:
    return identity.operator_headers()


def stack_key() -> SigningKey:
    """The key the stack's identity provider signs with."""
    return SigningKey.from_pem(config.stack_secret("identity-signing.key").encode())


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    made = {"iss": ISSUER, "aud": AUDIENCE, "sub": "cust-forged", "roles": ["operator"],
            "iat": now, "exp": now + 300, **changes}
    return {k: v for k, v in made.items() if v is not None}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _the_endpoints(sku: str, saga_id: str, order_id: str) -> list[tuple[str, str, Any]]:
    """Every business endpoint, as (method, URL, JSON body)."""
    return [
        ("POST", f"{config.PEDIDOS}/orders", order_body([(sku, 1)])),
        ("GET", f"{config.PEDIDOS}/orders/{order_id}", None),
        ("GET", f"{config.PEDIDOS}/sagas/{saga_id}/status", None),
        ("GET", f"{config.PEDIDOS}/sagas/{saga_id}/history", None),
        ("POST", f"{config.PEDIDOS}/sagas/{saga_id}/cancel", None),
        ("PUT", f"{config.INVENTARIO}/products/{sku}", {"quantity": 1}),
        ("GET", f"{config.INVENTARIO}/products/{sku}", None),
        ("GET", f"{config.PAGOS}/payments?saga_id={saga_id}", None),
        ("GET", f"{config.PEDIDOS}/metrics", None),
        ("GET", f"{config.INVENTARIO}/metrics", None),
        ("GET", f"{config.PAGOS}/metrics", None),
    ]


async def _all_refused(http: httpx.AsyncClient, headers: dict[str, str], status: int) -> None:
    sku, saga_id, order_id = new_sku(), str(uuid.uuid4()), str(uuid.uuid4())
    answers = {f"{method} {url}": (await http.request(method, url, json=body,
                                                      headers=headers)).status_code
               for method, url, body in _the_endpoints(sku, saga_id, order_id)}
    assert answers == dict.fromkeys(answers, status)


async def test_without_a_token_every_business_endpoint_is_a_401(http: httpx.AsyncClient) -> None:
    await _all_refused(http, {}, 401)
    r = await http.get(f"{config.PEDIDOS}/orders/{uuid.uuid4()}")
    assert r.headers["WWW-Authenticate"] == "Bearer"


async def test_health_readiness_and_the_openapi_document_stay_open(
        http: httpx.AsyncClient) -> None:
    for base in (config.PEDIDOS, config.INVENTARIO, config.PAGOS):
        for path in ("/health", "/ready", "/openapi.json"):
            assert (await http.get(f"{base}{path}")).status_code == 200, (base, path)


@pytest.mark.parametrize("what", [
    "garbage", "expired", "another audience", "another issuer", "not valid yet", "unsigned",
    "tampered", "HMAC with the public key", "a key the issuer does not publish",
    "an unknown key id", "an ID token",
])
async def test_a_token_that_is_not_valid_is_a_401(http: httpx.AsyncClient, what: str) -> None:
    key = stack_key()
    past = int(time.time()) - 3600
    if what == "garbage":
        token = "not-a-jwt"
    elif what == "expired":
        token = key.sign(claims(iat=past - 300, exp=past))
    elif what == "another audience":
        token = key.sign(claims(aud="another-api"))
    elif what == "another issuer":
        token = key.sign(claims(iss="https://issuer.example"))
    elif what == "not valid yet":
        token = key.sign(claims(nbf=int(time.time()) + 3600))
    elif what == "unsigned":
        token = jwt.encode(claims(), None, algorithm="none", headers={"kid": key.kid})
    elif what == "tampered":
        header, payload, signature = identity.customer_token(customer()).split(".")
        promoted = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        promoted["roles"] = ["operator"]
        token = f"{header}.{_b64(json.dumps(promoted).encode())}.{signature}"
    elif what == "HMAC with the public key":
        # Made by hand: PyJWT itself refuses to use a public key as an HMAC secret.
        public = key.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        signed = (f"{_b64(json.dumps({'alg': 'HS256', 'typ': 'JWT', 'kid': key.kid}).encode())}"
                  f".{_b64(json.dumps(claims()).encode())}")
        token = f"{signed}.{_b64(hmac.new(public, signed.encode(), hashlib.sha256).digest())}"
    elif what == "an ID token":
        # Signed by the issuer's key with every claim right, but typed as an OpenID Connect
        # ID token is (JWT), not as an access token (at+jwt, RFC 9068).
        token = key.sign(claims(), token_type="JWT")
    elif what == "a key the issuer does not publish":
        # The issuer's key id, another key: the signature does not verify.
        stranger = SigningKey.from_pem(new_private_key_pem())
        token = SigningKey(key.kid, stranger.private).sign(claims())
    else:
        token = SigningKey.from_pem(new_private_key_pem()).sign(claims())
    await _all_refused(http, identity.bearer(token), 401)


async def test_a_token_signed_by_the_issuers_key_with_the_right_claims_is_accepted(
        http: httpx.AsyncClient) -> None:
    """The control for the test above: the same forging, nothing changed, is let through."""
    token = stack_key().sign(claims())
    r = await http.get(f"{config.PEDIDOS}/metrics", headers=identity.bearer(token))
    assert r.status_code == 200


async def test_a_customer_may_not_do_what_is_for_operators(http: httpx.AsyncClient) -> None:
    headers = as_customer(customer())
    sku = new_sku()
    put = await http.put(f"{config.INVENTARIO}/products/{sku}", json={"quantity": 5},
                         headers=headers)
    assert put.status_code == 403
    for base in (config.PEDIDOS, config.INVENTARIO, config.PAGOS):
        for path in ("/metrics", "/docs", "/redoc"):
            r = await http.get(f"{base}{path}", headers=headers)
            assert r.status_code == 403, (base, path)
            r = await http.get(f"{base}{path}", headers=as_operator())
            assert r.status_code == 200, (base, path)


async def test_an_operator_places_no_order(http: httpx.AsyncClient) -> None:
    r = await http.post(f"{config.PEDIDOS}/orders", json=order_body([(new_sku(), 1)]),
                        headers=as_operator())
    assert r.status_code == 403


async def test_an_order_names_the_customer_of_the_token(saga: Saga,
                                                        http: httpx.AsyncClient) -> None:
    me, someone_else = customer(), customer()
    body = order_body([(new_sku(), 1)], customer=someone_else)
    r = await http.post(f"{config.PEDIDOS}/orders", json=body, headers=as_customer(me))
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "customer_id"]
    body.pop("customer_id")
    r = await http.post(f"{config.PEDIDOS}/orders", json=body, headers=as_customer(me))
    assert r.status_code == 202, r.text
    order = await saga.order(r.json()["order_id"])
    assert order["customer_id"] == me


async def test_another_customers_order_saga_and_payments_do_not_exist_for_a_customer(
        saga: Saga, http: httpx.AsyncClient) -> None:
    owner, other = customer(), customer()
    sku = new_sku()
    await saga.set_stock(sku, 5)
    r = await http.post(f"{config.PEDIDOS}/orders", json=order_body([(sku, 1)], customer=owner),
                        headers=as_customer(owner))
    assert r.status_code == 202, r.text
    placed = r.json()
    await saga.wait_status(placed["order_id"], "COMPLETADA", timeout=30)
    order_id, saga_id = placed["order_id"], placed["saga_id"]
    reads = [f"{config.PEDIDOS}/orders/{order_id}", f"{config.PEDIDOS}/sagas/{saga_id}/status",
             f"{config.PEDIDOS}/sagas/{saga_id}/history",
             f"{config.PAGOS}/payments?saga_id={saga_id}"]
    missing = str(uuid.uuid4())
    for url in reads:
        theirs = await http.get(url, headers=as_customer(other))
        assert theirs.status_code == 404, url
        # As a saga that does not exist: nothing tells the two apart.
        nobodys = await http.get(url.replace(saga_id, missing).replace(order_id, missing),
                                 headers=as_customer(other))
        assert (nobodys.status_code, nobodys.json().keys()) == (404, theirs.json().keys())
        assert (await http.get(url, headers=as_customer(owner))).status_code == 200, url
        assert (await http.get(url, headers=as_operator())).status_code == 200, url
    [payment] = (await http.get(reads[-1], headers=as_customer(owner))).json()
    assert payment["status"] == "CAPTURED"


async def test_a_customer_cancels_its_own_saga_and_no_one_elses(saga: Saga,
                                                                http: httpx.AsyncClient) -> None:
    owner, other = customer(), customer()
    sku = new_sku()
    await saga.set_stock(sku, 0)  # no stock: the saga ends without a charge, cancelled or not
    placed = await saga.place(order_body([(sku, 1)], customer=owner))
    cancel = f"{config.PEDIDOS}/sagas/{placed['saga_id']}/cancel"
    assert (await http.post(cancel, headers=as_customer(other))).status_code == 404
    mine = await http.post(cancel, headers=as_customer(owner))
    assert mine.status_code in (202, 409), mine.text  # 409: the stock check ended it first
    history = await saga.history(placed["saga_id"])
    assert not any(e["actor"] == f"customer:{other}" for e in history)


async def test_an_idempotency_key_is_each_customers_own(saga: Saga,
                                                       http: httpx.AsyncClient) -> None:
    first, second = customer(), customer()
    sku, key = new_sku(), f"key-{uuid.uuid4()}"
    answers = []
    for who in (first, second, first):
        r = await http.post(f"{config.PEDIDOS}/orders", json=order_body([(sku, 1)], customer=who),
                            headers={**as_customer(who), "Idempotency-Key": key})
        assert r.status_code == 202, r.text
        answers.append(r.json())
    assert answers[0]["order_id"] != answers[1]["order_id"], "another customer's order"
    assert answers[2]["order_id"] == answers[0]["order_id"], "the customer's own replay"
    assert (await saga.order(answers[1]["order_id"]))["customer_id"] == second

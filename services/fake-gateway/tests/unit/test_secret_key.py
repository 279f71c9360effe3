"""The gateway answers only callers that present its secret key (``Authorization: Bearer``):
charges, refunds and the ledger alike; the health check stays open. And it charges only
currencies with an ISO 4217 minor unit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_gateway.app import create_app
from fake_gateway.secret_key import MissingSecretKey, configured_key, presented

KEY = "sk_test_not-a-real-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
CHARGE = {"amount": 1000, "currency": "clp", "source": "tok_visa"}


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(tmp_path / "ledger.sqlite3", secret_key=KEY)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        yield client


async def _post(client: httpx.AsyncClient, path: str, body: dict[str, Any], key: str,
                headers: dict[str, str]) -> httpx.Response:
    return await client.post(path, json=body, headers={"Idempotency-Key": key, **headers})


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Bearer sk_test_wrong"}, {"Authorization": KEY},
    {"Authorization": f"Basic {KEY}"}, {"Authorization": f"Bearer {KEY}x"},
    {"Authorization": "Bearer "},
])
async def test_without_the_key_every_call_is_refused_and_nothing_is_done(
        gateway: httpx.AsyncClient, headers: dict[str, str]) -> None:
    charge = await _post(gateway, "/v1/charges", CHARGE, "charge-1", headers)
    refund = await _post(gateway, "/v1/refunds", {"charge": "ch_x"}, "refund-1", headers)
    ledger = await gateway.get("/ledger", headers=headers)
    for answer in (charge, refund, ledger):
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["type"] == "invalid_request_error"
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert (await gateway.get("/ledger", headers=AUTH)).json() == {"charges": [], "refunds": []}


async def test_a_malformed_request_without_the_key_is_refused_for_the_key(gateway: httpx.AsyncClient) -> None:
    answer = await _post(gateway, "/v1/charges", {"amount": "x"}, "charge-1", {})
    assert answer.status_code == 401


async def test_with_the_key_charges_refunds_and_the_ledger_answer(gateway: httpx.AsyncClient) -> None:
    charge = await _post(gateway, "/v1/charges", CHARGE, "charge-1", AUTH)
    assert charge.status_code == 200, charge.text
    assert (charge.json()["amount"], charge.json()["currency"]) == (1000, "clp")
    refund = await _post(gateway, "/v1/refunds", {"charge": charge.json()["id"]}, "refund-1",
                         AUTH)
    assert refund.status_code == 200, refund.text
    ledger = (await gateway.get("/ledger", headers={"Authorization": f"bearer {KEY}"})).json()
    assert [(c["amount"], c["amount_refunded"]) for c in ledger["charges"]] == [(1000, 1000)]
    assert (await gateway.get("/health")).status_code == 200, "the health check stays open"


@pytest.mark.parametrize("currency", ["xau", "abc", "us"])
async def test_a_currency_without_a_minor_unit_is_refused(gateway: httpx.AsyncClient, currency: str) -> None:
    answer = await _post(gateway, "/v1/charges", {**CHARGE, "currency": currency}, "charge-1", AUTH)
    assert answer.status_code in (400, 422), answer.text
    assert (await gateway.get("/ledger", headers=AUTH)).json()["charges"] == []


def test_the_key_comes_from_the_variable_or_its_file(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    monkeypatch.delenv("GATEWAY_SECRET_KEY_FILE", raising=False)
    monkeypatch.setenv("GATEWAY_SECRET_KEY", KEY)
    assert configured_key() == KEY
    monkeypatch.delenv("GATEWAY_SECRET_KEY")
    (tmp_path / "key").write_text(KEY + "\n")
    monkeypatch.setenv("GATEWAY_SECRET_KEY_FILE", str(tmp_path / "key"))
    assert configured_key() == KEY
    monkeypatch.delenv("GATEWAY_SECRET_KEY_FILE")
    with pytest.raises(MissingSecretKey, match="GATEWAY_SECRET_KEY"):
        configured_key()
    with pytest.raises(MissingSecretKey):
        create_app(tmp_path / "ledger.sqlite3")


def test_only_the_bearer_scheme_with_the_whole_key_is_accepted() -> None:
    assert presented(f"Bearer {KEY}", KEY) and presented(f"bearer {KEY}", KEY)
    assert not presented(None, KEY) and not presented(KEY, KEY)
    assert not presented(f"Bearer {KEY[:-1]}", KEY)

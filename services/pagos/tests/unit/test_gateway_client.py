"""The gateway client against a real HTTP server in the test's process: each answer of the
gateway maps to the outcome the state machine expects, and a gateway that cannot be reached or
does not answer in time is "unavailable" (the charge is retried under the same idempotency
key), never a decline."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
import uvicorn
from aiohttp import web

from pagos import metrics as pagos_metrics
from pagos.adapters.gateway_client import GatewayClient
from pagos.config import PagosSettings
from pagos.domain.payment import Outcome

KEY = "sk_test_not-a-real-key"


class _Gateway:
    def __init__(self) -> None:
        self.answer: tuple[int, dict[str, Any]] = (200, {"id": "ch_1"})
        self.raw: tuple[int, bytes] | None = None
        """An answer that is not JSON, in the place of ``answer``."""
        self.delay_s = 0.0
        self.seen: list[tuple[str, str | None, dict[str, Any]]] = []
        self.authorizations: list[str | None] = []
        self.client_ports: list[int] = []

    async def handle(self, request: web.Request) -> web.Response:
        assert request.transport is not None
        self.client_ports.append(request.transport.get_extra_info("peername")[1])
        self.seen.append((request.path, request.headers.get("Idempotency-Key"),
                          await request.json()))
        self.authorizations.append(request.headers.get("Authorization"))
        await asyncio.sleep(self.delay_s)
        if self.raw is not None:
            return web.Response(body=self.raw[1], status=self.raw[0], content_type="text/html")
        status, body = self.answer
        return web.json_response(body, status=status)


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[_Gateway, str]]:
    fake = _Gateway()
    app = web.Application()
    app.router.add_post("/v1/charges", fake.handle)
    app.router.add_post("/v1/refunds", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield fake, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def _charge(client: GatewayClient) -> Any:
    return await client.charge(amount_minor=1998, currency="usd", token="tok_visa",
                               idempotency_key="charge-s1", saga_id="s1")


@pytest.mark.parametrize(("status", "body", "outcome", "charge_id", "decline"), [
    (200, {"id": "ch_9"}, Outcome.APPROVED, "ch_9", None),
    (402, {"error": {"decline_code": "insufficient_funds", "message": "no"}}, Outcome.DECLINED,
     None, "insufficient_funds"),
    (503, {}, Outcome.UNAVAILABLE, None, None),
    (429, {}, Outcome.UNAVAILABLE, None, None),
    (400, {"error": "bad"}, Outcome.REJECTED, None, None),
    # The gateway refused pagos' key: nothing charged, and not the card's fault.
    (401, {"error": {"type": "invalid_request_error"}}, Outcome.UNAVAILABLE, None, None),
])
async def test_each_answer_maps_to_its_outcome(gateway: tuple[_Gateway, str], status: int,
                                               body: dict[str, Any], outcome: Outcome,
                                               charge_id: str | None,
                                               decline: str | None) -> None:
    fake, url = gateway
    fake.answer = (status, body)
    client = GatewayClient(url, secret_key=KEY, timeout_s=5)
    try:
        result = await _charge(client)
    finally:
        await client.close()
    assert (result.outcome, result.charge_id, result.decline_code) == (outcome, charge_id,
                                                                       decline)
    assert fake.seen == [("/v1/charges", "charge-s1", {
        "amount": 1998, "currency": "usd", "source": "tok_visa", "metadata": {"saga_id": "s1"}})]


async def test_a_refusal_that_quotes_the_request_is_kept_without_the_token(
        gateway: tuple[_Gateway, str]) -> None:
    """The detail goes to the payment's attempt log and maybe a dead letter: a validation error
    quoting the request must not carry the token there."""
    fake, url = gateway
    fake.answer = (422, {"detail": [{"loc": ["body", "currency"], "msg": "bad",
                                     "input": {"source": "tok_visa", "currency": "usd"}}]})
    client = GatewayClient(url, secret_key=KEY, timeout_s=5)
    try:
        result = await _charge(client)
    finally:
        await client.close()
    assert result.outcome is Outcome.REJECTED and result.detail.startswith("HTTP 422: ")
    assert "tok_visa" not in result.detail and "[MASKED]" in result.detail


# A card token in the gateway's own shape, which no pattern of pagos knows.
CARD = "pm_1PxCardOfTheVictim42"


async def _charge_with(url: str, token: str) -> Any:
    client = GatewayClient(url, secret_key=KEY, timeout_s=5)
    try:
        return await client.charge(amount_minor=1998, currency="usd", token=token,
                                   idempotency_key="charge-s1", saga_id="s1")
    finally:
        await client.close()


async def test_a_refusal_that_echoes_the_card_token_keeps_its_code_and_message_without_it(
        gateway: tuple[_Gateway, str]) -> None:
    """Stripe's "No such PaymentMethod: 'pm_…'": the detail goes to the attempt log and the
    dead letter, so the token it was given is replaced whatever its shape."""
    fake, url = gateway
    fake.answer = (400, {"error": {"type": "invalid_request_error", "param": "source",
                                   "message": f"No such PaymentMethod: '{CARD}'"}})
    result = await _charge_with(url, CARD)
    assert result.outcome is Outcome.REJECTED
    assert result.detail == "HTTP 400 invalid_request_error: No such PaymentMethod: '[MASKED]'"


async def test_a_decline_that_echoes_the_card_token_carries_none_into_its_event(
        gateway: tuple[_Gateway, str]) -> None:
    """A decline's message becomes PagoRechazado's reason, on the wire."""
    fake, url = gateway
    fake.answer = (402, {"error": {"decline_code": "do_not_honor",
                                   "message": f"Card {CARD} was declined ({CARD})"}})
    result = await _charge_with(url, CARD)
    assert result.outcome is Outcome.DECLINED and result.decline_code == "do_not_honor"
    assert result.detail == "Card [MASKED] was declined ([MASKED])"


async def test_a_long_message_is_cut_after_the_token_is_taken_out(
        gateway: tuple[_Gateway, str]) -> None:
    """Cut first, a message could keep the start of the token, which no replacement finds."""
    fake, url = gateway
    fake.answer = (400, {"error": {"code": "invalid", "message": "x" * 270 + CARD}})
    result = await _charge_with(url, CARD)
    assert CARD[:4] not in result.detail and len(result.detail) <= 300


async def test_a_refusal_in_no_shape_the_client_knows_is_kept_cut_and_without_the_token(
        gateway: tuple[_Gateway, str]) -> None:
    fake, url = gateway
    fake.answer = (422, {"detail": [{"loc": ["body", "source"], "input": CARD}]})
    result = await _charge_with(url, CARD)
    assert result.detail.startswith("HTTP 422: ") and CARD not in result.detail


async def test_a_402_without_the_apis_error_object_is_an_unknown_outcome(
        gateway: tuple[_Gateway, str]) -> None:
    """A page from something in between says nothing of what the gateway did: asked again
    under the same key, never taken as "nothing was charged"."""
    fake, url = gateway
    fake.raw = (402, b"<html>declined</html>")
    before = _unintelligible("charge")
    result = await _charge_with(url, CARD)
    assert result.outcome is Outcome.UNAVAILABLE and result.decline_code is None
    assert result.detail == ("HTTP 402 without the charge's error object: a reply that is not "
                             "the API's")
    assert _unintelligible("charge") == before + 1


async def test_a_402_with_the_apis_error_object_but_no_code_is_a_card_decline(
        gateway: tuple[_Gateway, str]) -> None:
    fake, url = gateway
    fake.answer = (402, {"error": {"message": "Your card was declined."}})
    result = await _charge_with(url, CARD)
    assert result.outcome is Outcome.DECLINED and result.decline_code == "card_declined"


async def test_a_refund_refusal_keeps_the_gateways_code_and_a_scrubbed_message(
        gateway: tuple[_Gateway, str]) -> None:
    fake, url = gateway
    fake.answer = (400, {"error": {"code": "charge_already_refunded",
                                   "message": "Charge ch_1 (source tok_visa) is refunded"}})
    client = GatewayClient(url, secret_key=KEY, timeout_s=5)
    try:
        result = await client.refund(charge_id="ch_1", amount_minor=1998,
                                     idempotency_key="refund-s1")
    finally:
        await client.close()
    assert not result.succeeded
    assert result.detail == ("HTTP 400 charge_already_refunded: Charge ch_1 (source [MASKED]) "
                             "is refunded")


async def test_a_gateway_that_does_not_answer_in_time_is_unavailable(
        gateway: tuple[_Gateway, str]) -> None:
    fake, url = gateway
    fake.delay_s = 2
    client = GatewayClient(url, secret_key=KEY, timeout_s=0.2)
    try:
        result = await _charge(client)
    finally:
        await client.close()
    assert result.outcome is Outcome.UNAVAILABLE and result.detail == "gateway timeout"


async def test_a_gateway_nobody_listens_for_is_unavailable() -> None:
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = GatewayClient(f"http://127.0.0.1:{port}", secret_key=KEY, timeout_s=2)
    try:
        result = await _charge(client)
        refund = await client.refund(charge_id="ch_1", amount_minor=100,
                                     idempotency_key="refund-s1")
    finally:
        await client.close()
    assert result.outcome is Outcome.UNAVAILABLE and "transport error" in result.detail
    assert not refund.succeeded


async def test_a_refund_succeeds_only_on_200(gateway: tuple[_Gateway, str]) -> None:
    fake, url = gateway
    client = GatewayClient(url, secret_key=KEY, timeout_s=5)
    try:
        fake.answer = (200, {"id": "re_1"})
        done = await client.refund(charge_id="ch_1", amount_minor=int(Decimal("19.98") * 100),
                                   idempotency_key="refund-s1")
        fake.answer = (500, {"error": "boom"})
        failed = await client.refund(charge_id="ch_1", amount_minor=1998,
                                     idempotency_key="refund-s1")
    finally:
        await client.close()
    assert done.succeeded and done.refund_id == "re_1"
    assert not failed.succeeded and "HTTP 500" in failed.detail
    assert [s[:2] for s in fake.seen] == [("/v1/refunds", "refund-s1")] * 2


async def test_an_idle_connection_is_given_up_after_its_keep_alive(
        gateway: tuple[_Gateway, str]) -> None:
    """A connection idle past the client's keep-alive is not reused: a charge is never written
    to a connection the gateway may be closing at that moment."""
    fake, url = gateway
    kept = GatewayClient(url, secret_key=KEY, timeout_s=5)
    dropped = GatewayClient(url, secret_key=KEY, timeout_s=5,
                                                                     keep_alive_s=0.05)
    try:
        for client in (kept, dropped):
            await _charge(client)
            await asyncio.sleep(0.3)  # the idle time under test, not a wait for something
            await _charge(client)
    finally:
        await kept.close()
        await dropped.close()
    kept_ports, dropped_ports = fake.client_ports[:2], fake.client_ports[2:]
    assert kept_ports[0] == kept_ports[1]
    assert dropped_ports[0] != dropped_ports[1]


def test_pagos_gives_a_connection_up_before_a_server_with_a_short_keep_alive_would() -> None:
    """5 s is the shortest idle keep-alive common servers use (uvicorn's and Apache's
    default); a client that kept idle connections as long would race the server's close."""
    shortest_server_keep_alive_s = uvicorn.Config(app=None).timeout_keep_alive
    assert PagosSettings().gateway_keep_alive_s < shortest_server_keep_alive_s


async def test_every_call_carries_the_secret_key(gateway: tuple[_Gateway, str]) -> None:
    fake, url = gateway
    client = GatewayClient(url, secret_key=KEY, timeout_s=5)
    try:
        await _charge(client)
        fake.answer = (200, {"id": "re_1"})
        await client.refund(charge_id="ch_1", amount_minor=1998, idempotency_key="refund-s1")
    finally:
        await client.close()
    assert fake.authorizations == [f"Bearer {KEY}", f"Bearer {KEY}"]


def _unintelligible(call: str) -> float:
    return pagos_metrics.GATEWAY_UNINTELLIGIBLE_REPLIES.labels("pagos", call)._value.get()


# Bodies of a 200 that do not say what the gateway did: a proxy's page, a reply cut short, JSON
# that is not the API's object with its id.
NOT_THE_APIS = {
    "html": b"<html><body>502 Bad Gateway (from the proxy)</body></html>",
    "cut_short": b'{"id": "ch_',
    "not_utf8": b"\xff\xfe\x00",
    "no_id": b'{"object": "charge", "status": "succeeded"}',
    "null_id": b'{"id": null}',
    "a_list": b'[{"id": "ch_1"}]',
}


@pytest.mark.parametrize("body", sorted(NOT_THE_APIS))
async def test_a_200_that_is_not_the_apis_answer_is_an_unknown_charge_and_counted(
        gateway: tuple[_Gateway, str], body: str) -> None:
    """Neither an approval nor a crash: the charge may have been made, so its outcome is
    unknown (made again under its key); the reply is counted, and nothing of its body or the
    card token is kept."""
    fake, url = gateway
    fake.raw = (200, NOT_THE_APIS[body])
    seen = _unintelligible("charge")
    result = await _charge_with(url, CARD)
    assert result.outcome is Outcome.UNAVAILABLE and result.charge_id is None
    assert result.detail == "HTTP 200 without the charge's id: a reply that is not the API's"
    assert _unintelligible("charge") == seen + 1


async def test_a_refund_answered_by_a_200_that_is_not_the_apis_is_not_made(
        gateway: tuple[_Gateway, str]) -> None:
    """Not a refund the payment could record: failed, tried again under its key."""
    fake, url = gateway
    fake.raw = (200, NOT_THE_APIS["html"])
    seen = _unintelligible("refund")
    client = GatewayClient(url, secret_key=KEY, timeout_s=5)
    try:
        result = await client.refund(charge_id="ch_1", amount_minor=1998,
                                     idempotency_key="refund-s1")
    finally:
        await client.close()
    assert not result.succeeded and result.refund_id is None
    assert result.detail == "HTTP 200 without the refund's id: a reply that is not the API's"
    assert _unintelligible("refund") == seen + 1

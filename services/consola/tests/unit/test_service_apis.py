"""What the services' answers mean to a page: a 404 is nothing there, a 401 is a sign-in to do
again, anything else that is not a success is a service that did not answer; the operator's
own token goes with every call."""

from __future__ import annotations

import httpx
import pytest

from consola.adapters.service_apis import ServiceApis
from consola.usecases.ports import NotFound, ServiceUnavailable, SignInAgain
from consola.usecases.view_saga import NotAnId, find_saga


def apis(handler: httpx.MockTransport) -> ServiceApis:
    return ServiceApis(httpx.AsyncClient(transport=handler), "op-token",
                       pedidos_url="http://pedidos", pagos_url="http://pagos",
                       inventario_url="http://inventario")


@pytest.mark.parametrize(("status", "raised"), [
    (404, NotFound), (401, SignInAgain), (403, ServiceUnavailable), (500, ServiceUnavailable),
    (503, ServiceUnavailable)])
async def test_an_answer_that_is_not_a_success(status: int, raised: type[Exception]) -> None:
    api = apis(httpx.MockTransport(lambda r: httpx.Response(status, json={"detail": "x"})))
    with pytest.raises(raised):
        await api.saga_history("s-1")


async def test_a_service_that_does_not_answer() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)
    with pytest.raises(ServiceUnavailable, match="pagos: no answer"):
        await apis(httpx.MockTransport(refuse)).payments("s-1")


async def test_every_call_carries_the_operators_token() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"entries": []} if "history" in request.url.path else [])
    api = apis(httpx.MockTransport(answer))
    await api.saga_history("s-1")
    await api.payments("s-1")
    assert [r.headers["authorization"] for r in seen] == ["Bearer op-token"] * 2
    assert str(seen[1].url) == "http://pagos/payments?saga_id=s-1"


class FakeReads:
    """pedidos knows one saga and its order."""

    saga_id, order_id = "3f2b8c1e-5d4a-4b7e-9c1d-2a6f8e0b7c45", "0b8e1c2a-7f6d-4e5c-8b9a-1d2c3e4f5a6b"

    async def saga_status(self, saga_id: str) -> dict[str, str]:
        if saga_id != self.saga_id:
            raise NotFound(saga_id)
        return {"saga_id": saga_id}

    async def order(self, order_id: str) -> dict[str, str]:
        if order_id != self.order_id:
            raise NotFound(order_id)
        return {"saga_id": self.saga_id}

    async def saga_history(self, saga_id: str) -> list[dict[str, str]]:
        return []

    async def payments(self, saga_id: str) -> list[dict[str, str]]:
        return []


async def test_a_saga_is_found_by_its_id_or_its_orders() -> None:
    reads = FakeReads()
    assert await find_saga(reads, f" {reads.saga_id} ") == reads.saga_id
    assert await find_saga(reads, reads.order_id.upper()) == reads.saga_id
    assert await find_saga(reads, "6c0ffee0-0000-4000-8000-000000000000") is None
    with pytest.raises(NotAnId):
        await find_saga(reads, "not-an-id")

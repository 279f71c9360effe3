"""The fake payment gateway over HTTP, as pagos calls it: a charge and a refund, each under an
idempotency key derived from the order, so that a step DBOS runs again (a retry, a recovered
workflow) replays the gateway's first answer instead of charging twice."""

from __future__ import annotations

from dataclasses import dataclass

import httpx


class GatewayUnavailable(Exception):
    """No answer, or a 5xx/429: the outcome is unknown; asked again under the same key."""


class GatewayRefused(Exception):
    """A 4xx other than a decline: asking again would be refused again."""


@dataclass(frozen=True)
class ChargeOutcome:
    charge_id: str | None
    decline_code: str | None = None

    @property
    def approved(self) -> bool:
        return self.decline_code is None


Request = tuple[str, str, dict[str, object]]  # path, idempotency key, body


def charge_request(order_id: str, amount_minor: int, currency: str, token: str) -> Request:
    return ("/v1/charges", f"peer-charge-{order_id}", {
        "amount": amount_minor, "currency": currency, "source": token,
        "metadata": {"order_id": order_id}})


def refund_request(order_id: str, charge_id: str) -> Request:
    return ("/v1/refunds", f"peer-refund-{order_id}", {"charge": charge_id})


def answered(path: str, response: httpx.Response) -> httpx.Response:
    if response.status_code >= 500 or response.status_code == 429:
        raise GatewayUnavailable(f"{path}: HTTP {response.status_code}")
    return response


def charge_outcome(response: httpx.Response) -> ChargeOutcome:
    if response.status_code == 200:
        return ChargeOutcome(response.json()["id"])
    error = response.json().get("error") or {}
    if response.status_code == 402 and error.get("type") == "card_error":
        return ChargeOutcome(error.get("charge"), error.get("decline_code") or "declined")
    if response.status_code == 402:
        # A 402 without the API's error object: not a decline anyone stated.
        raise GatewayUnavailable("/v1/charges: HTTP 402 without a card error")
    raise GatewayRefused(f"/v1/charges: HTTP {response.status_code} {error.get('code')}")


def refund_id(response: httpx.Response) -> str:
    if response.status_code == 200:
        return str(response.json()["id"])
    raise GatewayRefused(f"/v1/refunds: HTTP {response.status_code}")


def _client_options(base_url: str, secret_key: str, timeout_s: float) -> dict[str, object]:
    return {"base_url": base_url, "timeout": timeout_s,
            "headers": {"Authorization": f"Bearer {secret_key}"},
            "limits": httpx.Limits(max_connections=256, max_keepalive_connections=64)}


class Gateway:
    def __init__(self, base_url: str, secret_key: str, timeout_s: float) -> None:
        # One client per process, shared by the workflow threads (httpx.Client is thread-safe),
        # so that the connections to the gateway are kept alive.
        self._http = httpx.Client(**_client_options(base_url, secret_key, timeout_s))  # type: ignore[arg-type]

    def _post(self, path: str, key: str, body: dict[str, object]) -> httpx.Response:
        try:
            response = self._http.post(path, json=body, headers={"Idempotency-Key": key})
        except httpx.HTTPError as exc:
            raise GatewayUnavailable(f"{path}: {type(exc).__name__}") from None
        return answered(path, response)

    def charge(self, order_id: str, amount_minor: int, currency: str, token: str
               ) -> ChargeOutcome:
        return charge_outcome(self._post(*charge_request(order_id, amount_minor, currency,
                                                         token)))

    def refund(self, order_id: str, charge_id: str) -> str:
        return refund_id(self._post(*refund_request(order_id, charge_id)))

    def close(self) -> None:
        self._http.close()


class AsyncGateway:
    """The same calls for the async style, on the event loop DBOS runs its workflows on."""

    def __init__(self, base_url: str, secret_key: str, timeout_s: float) -> None:
        self._http = httpx.AsyncClient(**_client_options(base_url, secret_key, timeout_s))  # type: ignore[arg-type]

    async def _post(self, path: str, key: str, body: dict[str, object]) -> httpx.Response:
        try:
            response = await self._http.post(path, json=body, headers={"Idempotency-Key": key})
        except httpx.HTTPError as exc:
            raise GatewayUnavailable(f"{path}: {type(exc).__name__}") from None
        return answered(path, response)

    async def charge(self, order_id: str, amount_minor: int, currency: str, token: str
                     ) -> ChargeOutcome:
        return charge_outcome(await self._post(*charge_request(order_id, amount_minor,
                                                               currency, token)))

    async def refund(self, order_id: str, charge_id: str) -> str:
        return refund_id(await self._post(*refund_request(order_id, charge_id)))

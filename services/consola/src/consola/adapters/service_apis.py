"""pedidos' and pagos' APIs, called with the signed-in operator's own bearer token: the console
holds no credential of its own for them, so what an operator may see or do is what the services
let that operator see or do, and their audit names the operator."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from consola.usecases.ports import NotFound, ServiceUnavailable, SignInAgain


class ServiceApis:
    """One operator's calls (``token``), over the console's shared connection pool."""

    def __init__(self, http: httpx.AsyncClient, token: str, *, pedidos_url: str,
                 pagos_url: str) -> None:
        self._http = http
        self._headers = {"Authorization": f"Bearer {token}"}
        self._pedidos = pedidos_url.rstrip("/")
        self._pagos = pagos_url.rstrip("/")

    async def _get(self, service: str, url: str, params: dict[str, str] | None = None) -> Any:
        try:
            answer = await self._http.get(url, headers=self._headers, params=params)
        except httpx.HTTPError as exc:
            raise ServiceUnavailable(service, f"no answer ({type(exc).__name__})") from None
        if answer.status_code == 404:
            raise NotFound(url)
        if answer.status_code == 401:
            raise SignInAgain(service)
        if answer.status_code >= 400:
            # 403 included: a token the console admitted as an operator's should pass; if the
            # service says otherwise, the page says so rather than pretend there is nothing.
            raise ServiceUnavailable(service, f"answered {answer.status_code}")
        return answer.json()

    async def saga_status(self, saga_id: str) -> dict[str, Any]:
        return dict(await self._get("pedidos", f"{self._pedidos}/sagas/{quote(saga_id)}/status"))

    async def saga_history(self, saga_id: str) -> list[dict[str, Any]]:
        body = await self._get("pedidos", f"{self._pedidos}/sagas/{quote(saga_id)}/history")
        return list(body["entries"])

    async def order(self, order_id: str) -> dict[str, Any]:
        return dict(await self._get("pedidos", f"{self._pedidos}/orders/{quote(order_id)}"))

    async def payments(self, saga_id: str) -> list[dict[str, Any]]:
        return list(await self._get("pagos", f"{self._pagos}/payments", {"saga_id": saga_id}))

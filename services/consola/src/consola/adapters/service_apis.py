"""The services' APIs, called with the signed-in operator's own bearer token: the console
holds no credential of its own for them, so what an operator may see or do is what the services
let that operator see or do, and their audit names the operator."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from consola.usecases.ports import Answer, NotFound, ServiceUnavailable, SignInAgain
from sagakit.operations import LetterUnavailable, ReplayRefused

# What an action's answer may be, for the use case to say: done, done before, no such object,
# not in a state for it, refused field by field.
ACTION_ANSWERS = frozenset({200, 201, 404, 409, 422})


class ServiceApis:
    """One operator's calls (``token``), over the console's shared connection pool. Also the
    ``DeadLetterApi`` the shared replayer (``sagakit.operations.replayer``) reads letters and
    records replays through, so that each service audits the operator who signed in."""

    def __init__(self, http: httpx.AsyncClient, token: str, *, pedidos_url: str,
                 pagos_url: str, inventario_url: str) -> None:
        self._http = http
        self._headers = {"Authorization": f"Bearer {token}"}
        self._pedidos = pedidos_url.rstrip("/")
        self._pagos = pagos_url.rstrip("/")
        self._urls = {"pedidos": self._pedidos, "pagos": self._pagos,
                      "inventario": inventario_url.rstrip("/")}

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

    async def _post(self, service: str, url: str, body: dict[str, Any]) -> Answer:
        try:
            answer = await self._http.post(url, headers=self._headers, json=body)
        except httpx.HTTPError as exc:
            # The outcome is unknown: the page says so; the operator sends the form again
            # (both actions answer the same way to the same request twice).
            raise ServiceUnavailable(service, f"no answer ({type(exc).__name__}); the action "
                                              "may or may not have been recorded") from None
        if answer.status_code == 401:
            raise SignInAgain(service)
        if answer.status_code not in ACTION_ANSWERS:
            raise ServiceUnavailable(service, f"answered {answer.status_code}")
        try:
            parsed = answer.json()
        except ValueError:
            parsed = {}
        return Answer(answer.status_code, parsed if isinstance(parsed, dict) else {})

    async def resolve_payment(self, payment_id: str, reference: str, note: str | None
                              ) -> Answer:
        body: dict[str, Any] = {"reference": reference}
        if note is not None:
            body["note"] = note
        return await self._post(
            "pagos", f"{self._pagos}/payments/{quote(payment_id)}/resolution", body)

    async def archive_dead_letter(self, service: str, dead_letter_id: str, reason: str
                                  ) -> Answer:
        return await self._post(
            service, f"{self._urls[service]}/operator/dead-letters/{quote(dead_letter_id)}"
                     "/archive", {"reason": reason})

    def _letter_url(self, service: str, dead_letter_id: str, then: str = "") -> str:
        return f"{self._urls[service]}/operator/dead-letters/{quote(dead_letter_id)}{then}"

    async def letter(self, service: str, letter_id: str) -> dict[str, Any]:
        try:
            return dict(await self._get(service, self._letter_url(service, letter_id)))
        except NotFound:
            raise LetterUnavailable(f"{service} knows no dead letter {letter_id} (deleted "
                                    "past its retention?)") from None

    async def _recorded(self, service: str, url: str, body: dict[str, Any]) -> None:
        answer = await self._post(service, url, body)
        if answer.status not in (200, 201):
            raise ServiceUnavailable(service, f"did not record it (answered {answer.status}: "
                                              f"{answer.body.get('detail', '')})")

    async def forged(self, service: str, letter_id: str, reason: str) -> None:
        await self._recorded(service, self._letter_url(service, letter_id, "/forgeries"),
                             {"reason": reason})

    async def replayed(self, service: str, letter_id: str, message_id: str, topic: str) -> str:
        answer = await self._post(service, self._letter_url(service, letter_id, "/replays"),
                                  {"message_id": message_id, "topic": topic})
        if answer.status in (404, 409):
            raise ReplayRefused(str(answer.body.get("detail", "")))
        if answer.status not in (200, 201):
            raise ServiceUnavailable(service, f"did not claim the replay (answered "
                                              f"{answer.status}: {answer.body.get('detail', '')})")
        return str(answer.body["message_id"])

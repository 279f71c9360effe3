"""HTTP client of the (Stripe-like) payment gateway. Called outside any database transaction."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx
from sagakit import metrics

from pagos.domain.payment import Outcome


@dataclass(frozen=True)
class ChargeResult:
    outcome: Outcome
    charge_id: str | None = None
    decline_code: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class RefundResult:
    succeeded: bool
    refund_id: str | None = None
    detail: str = ""


class GatewayClient:
    def __init__(self, base_url: str, timeout_s: float) -> None:
        self._client = httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(timeout_s),
                                         limits=httpx.Limits(max_connections=100))

    async def close(self) -> None:
        await self._client.aclose()

    async def charge(self, *, amount_minor: int, currency: str, token: str,
                     idempotency_key: str, saga_id: str) -> ChargeResult:
        started = time.perf_counter()
        result = await self._charge(amount_minor, currency, token, idempotency_key, saga_id)
        metrics.GATEWAY_LATENCY.labels("charge", result.outcome.value).observe(
            time.perf_counter() - started)
        return result

    async def _charge(self, amount_minor: int, currency: str, token: str,
                      idempotency_key: str, saga_id: str) -> ChargeResult:
        try:
            resp = await self._client.post(
                "/v1/charges", headers={"Idempotency-Key": idempotency_key},
                json={"amount": amount_minor, "currency": currency, "source": token,
                      "metadata": {"saga_id": saga_id}})
        except httpx.TimeoutException:
            return ChargeResult(Outcome.UNAVAILABLE, detail="gateway timeout")
        except httpx.TransportError as exc:
            return ChargeResult(Outcome.UNAVAILABLE, detail=f"transport error: {exc!r}")
        if resp.status_code == 200:
            return ChargeResult(Outcome.APPROVED, charge_id=resp.json()["id"])
        if resp.status_code == 402:
            err = resp.json().get("error", {})
            return ChargeResult(Outcome.DECLINED, decline_code=err.get("decline_code")
                                or err.get("code") or "card_declined",
                                detail=err.get("message", ""))
        if resp.status_code >= 500 or resp.status_code == 429:
            return ChargeResult(Outcome.UNAVAILABLE, detail=f"HTTP {resp.status_code}")
        return ChargeResult(Outcome.REJECTED, detail=f"HTTP {resp.status_code}: {resp.text[:300]}")

    async def refund(self, *, charge_id: str, amount_minor: int, idempotency_key: str
                     ) -> RefundResult:
        started = time.perf_counter()
        try:
            resp = await self._client.post(
                "/v1/refunds", headers={"Idempotency-Key": idempotency_key},
                json={"charge": charge_id, "amount": amount_minor})
        except httpx.HTTPError as exc:
            result = RefundResult(False, detail=f"{type(exc).__name__}: {exc}")
        else:
            if resp.status_code == 200:
                result = RefundResult(True, refund_id=resp.json()["id"])
            else:
                result = RefundResult(False, detail=f"HTTP {resp.status_code}: {resp.text[:300]}")
        metrics.GATEWAY_LATENCY.labels("refund", "ok" if result.succeeded else "error").observe(
            time.perf_counter() - started)
        return result

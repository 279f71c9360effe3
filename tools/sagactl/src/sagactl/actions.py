"""sagactl's operator actions, through the owning service's API with an operator's token
(``sagactl.operator_access``): the service checks the role, decides, and audits the action with
who (the token's subject), when and why. sagactl writes to no database."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from sagactl import operator_access


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def _post(service: str, path: str, body: dict[str, Any]) -> Answer:
    request = urllib.request.Request(
        operator_access.service_url(service) + path, data=json.dumps(body).encode(),
        method="POST", headers={"content-type": "application/json",
                                "authorization": f"Bearer {operator_access.token()}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return Answer(answer.status, json.load(answer))
    except urllib.error.HTTPError as refused:
        text = refused.read().decode(errors="replace")
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = {"detail": text}
        return Answer(refused.code, parsed if isinstance(parsed, dict) else {"detail": parsed})


def cancel(saga_id: str, reason: str) -> Answer:
    return _post("pedidos", f"/sagas/{saga_id}/cancel", {"reason": reason})


def retry(saga_id: str, reason: str | None) -> Answer:
    return _post("pedidos", f"/sagas/{saga_id}/retry",
                 {} if reason is None else {"reason": reason})


def resolve_payment(payment_id: str, reference: str, note: str | None) -> Answer:
    body: dict[str, Any] = {"reference": reference}
    if note is not None:
        body["note"] = note
    return _post("pagos", f"/payments/{payment_id}/resolution", body)

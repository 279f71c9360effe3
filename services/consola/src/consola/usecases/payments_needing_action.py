"""Payments needing a person (``pagos_read.payments_needing_action_v1``: marked for a manual
refund and not resolved yet), and resolving one: pagos' ``POST /payments/{id}/resolution`` with
finance's reference (required) and a note, as the operator, whose ``sub`` pagos audits."""

from __future__ import annotations

import uuid
from typing import Any

from consola.usecases.outcome import BadField, Outcome, required_text
from consola.usecases.ports import OperatorActions, PaymentsNeedingActionReads

MAX_REFERENCE, MAX_NOTE = 200, 1000
"""pagos' own limits (``ResolutionRequest``)."""


async def payments_needing_action(reads: PaymentsNeedingActionReads) -> list[dict[str, Any]]:
    return await reads.payments_needing_action()


def _detail(body: dict[str, Any]) -> str:
    detail = body.get("detail")
    if isinstance(detail, list):  # FastAPI's validation errors: each field and its message
        return "; ".join(f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg')}"
                         for d in detail if isinstance(d, dict))
    return str(detail or "")


async def resolve_payment(actions: OperatorActions, payment_id: str, reference: str | None,
                          note: str | None) -> Outcome:
    """What pagos answered, said for a person. ``BadField`` before any call."""
    try:
        payment_id = str(uuid.UUID(payment_id))
    except ValueError:
        raise BadField("payment_id", "a payment id is a UUID") from None
    reference = required_text("reference", reference, MAX_REFERENCE)
    note = required_text("note", note, MAX_NOTE) if (note or "").strip() else None
    answer = await actions.resolve_payment(payment_id, reference, note)
    body = answer.body
    if answer.status == 201:
        return Outcome(True, 201, "Resolved",
                       f"payment {payment_id} resolved under {body.get('reference')} by "
                       f"{body.get('resolved_by')}: it leaves the list")
    if answer.status == 200:
        return Outcome(True, 200, "Already resolved, the same way",
                       f"payment {payment_id} was resolved before under this same reference "
                       f"by {body.get('resolved_by')} at {body.get('resolved_at')}: nothing "
                       "changed")
    if answer.status == 409 and isinstance(body.get("resolution"), dict):
        earlier = body["resolution"]
        return Outcome(False, 409, "Resolved already, under another reference",
                       f"payment {payment_id} was resolved by {earlier.get('resolved_by')} "
                       f"under {earlier.get('reference')}: the resolution stays as it was")
    if answer.status == 409:
        return Outcome(False, 409, "Nothing to resolve",
                       f"payment {payment_id} is {body.get('status')} and not marked for a "
                       "manual refund")
    if answer.status == 404:
        return Outcome(False, 404, "No such payment", f"pagos knows no payment {payment_id}")
    return Outcome(False, answer.status, "Refused by pagos", _detail(body))

"""The manual resolutions of payments on PostgreSQL (``pagos.usecases.resolve_payment``): an
operator action of its own kind in ``pagos.operator_actions``, at most one per payment (the
partial unique index of migration 0008), staged on the unit of work's commit statement."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import and_, cast, func, literal_column, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.types import Text

from pagos.adapters.tables import operator_actions, payments
from pagos.domain.payment import PaymentStatus
from pagos.usecases.resolve_payment import (
    PAYMENT_RESOLVED,
    PaymentToResolve,
    Resolution,
    ResolutionStore,
)
from sagakit import jsonio
from sagakit.store import Part, StagedWrite, UnitOfWork, WriteShape

_RESOLVED = Part("resolved", f"""INSERT INTO {{operator_actions}} (operator, action, saga_id, target,
                                     reason, detail)
VALUES (:res_operator, '{PAYMENT_RESOLVED}', :res_saga_id, :res_target, :res_note,
        CAST(:res_detail AS jsonb))
ON CONFLICT (target) WHERE action = '{PAYMENT_RESOLVED}' DO NOTHING
RETURNING id""", operator_actions)
_RECORD = WriteShape(_RESOLVED, guard=_RESOLVED)


def _resolution(row: Any) -> Resolution | None:
    if row.at is None:
        return None
    return Resolution(str(row.payment_id), row.saga_id, row.operator,
                      row.detail["reference"], row.reason, row.at)


class ResolutionRepository(ResolutionStore):
    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    async def find(self, payment_id: str) -> PaymentToResolve | None:
        try:
            key = uuid.UUID(payment_id)
        except ValueError:
            return None
        a = operator_actions
        row = (await self.uow.connection.execute(
            select(payments.c.payment_id, payments.c.saga_id, payments.c.status,
                   payments.c.manual_refund_required, a.c.at, a.c.operator, a.c.reason,
                   a.c.detail)
            .select_from(payments.outerjoin(a, and_(
                a.c.action == PAYMENT_RESOLVED,
                a.c.target == cast(payments.c.payment_id, Text))))
            .where(payments.c.payment_id == key))).first()
        if row is None:
            return None
        return PaymentToResolve(str(row.payment_id), row.saga_id, PaymentStatus(row.status),
                                row.manual_refund_required, _resolution(row))

    def record(self, resolution: Resolution) -> None:
        self.uow.stage(StagedWrite(_RECORD, {
            "res_operator": resolution.operator, "res_saga_id": resolution.saga_id,
            "res_target": resolution.payment_id, "res_note": resolution.note,
            "res_detail": jsonio.dumps({"reference": resolution.reference})}))


async def payments_needing_a_person(conn: AsyncConnection) -> int:
    """How many payments are marked for a manual refund and not resolved: the gauge's value,
    the same rows as ``pagos_read.payments_needing_action_v1``."""
    a = operator_actions
    resolved = select(a.c.id).where(a.c.action == PAYMENT_RESOLVED,
                                    a.c.target == cast(payments.c.payment_id, Text))
    count = (await conn.execute(
        select(func.count()).select_from(payments)
        # The status as a literal, not a parameter: so the predicate is the partial index's
        # (ix_payments_needing_action) in every plan, generic ones included.
        .where(or_(payments.c.manual_refund_required,
                   payments.c.status == literal_column(f"'{PaymentStatus.REFUND_FAILED.value}'")),
               ~resolved.exists()))).scalar_one()
    return int(count)

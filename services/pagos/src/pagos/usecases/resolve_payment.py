"""POST /payments/{payment_id}/resolution: an operator records that finance settled, by hand, a
payment marked for a manual refund (``REFUND_FAILED``), with the finance system's reference.

The resolution is an operator action (``pagos.operator_actions``, action ``payment_resolved``):
who, when, the reference and a note, written in one commit, at most once per payment. The
payment keeps its status and its ``manual_refund_required`` mark, which say what happened to
it; the resolution says that a person closed it, and takes it out of the payments that still
need one (``pagos_read.payments_needing_action_v1``).

The same reference again answers the resolution recorded (a client that retries after a lost
answer); another reference is refused, as is a payment that needs no one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from pagos.domain.payment import PaymentStatus, needs_a_person
from sagakit.ports import UnitOfWorkPort

PAYMENT_RESOLVED = "payment_resolved"


@dataclass(frozen=True)
class Resolution:
    payment_id: str
    saga_id: str
    operator: str
    reference: str
    note: str | None
    at: datetime | None = None
    """When it was recorded (None until it is)."""


@dataclass(frozen=True)
class PaymentToResolve:
    payment_id: str
    saga_id: str
    status: PaymentStatus
    manual_refund_required: bool
    resolution: Resolution | None


class ResolutionStore(Protocol):
    async def find(self, payment_id: str) -> PaymentToResolve | None:
        """The payment and its resolution, if any; None when there is no such payment."""
        ...

    def record(self, resolution: Resolution) -> None:
        """Stages the resolution; its guard: the payment has none yet (else ``commit`` returns
        False and nothing is written)."""
        ...


class PaymentNotFound(Exception):
    pass


class NothingToResolve(Exception):
    """The payment needs no person (409)."""

    def __init__(self, payment: PaymentToResolve) -> None:
        super().__init__(f"payment {payment.payment_id} is {payment.status.value} and not "
                         "marked for a manual refund: nothing to resolve")
        self.status = payment.status


class ResolvedOtherwise(Exception):
    """The payment was resolved already, under another reference (409)."""

    def __init__(self, resolution: Resolution) -> None:
        super().__init__(f"payment {resolution.payment_id} was resolved already, by "
                         f"{resolution.operator} with another reference")
        self.resolution = resolution


@dataclass(frozen=True)
class Resolved:
    resolution: Resolution
    created: bool
    """False: the same resolution was recorded before."""


def _decide(payment: PaymentToResolve, reference: str) -> Resolved | None:
    """The answer when there is nothing to write; None when the resolution is to be written."""
    if payment.resolution is not None:
        if payment.resolution.reference == reference:
            return Resolved(payment.resolution, created=False)
        raise ResolvedOtherwise(payment.resolution)
    if not needs_a_person(payment.status, payment.manual_refund_required):
        raise NothingToResolve(payment)
    return None


async def resolve_payment(uow: UnitOfWorkPort, store: ResolutionStore, payment_id: str, *,
                          operator: str, reference: str, note: str | None) -> Resolved:
    """Raises ``PaymentNotFound``, ``NothingToResolve``, ``ResolvedOtherwise``."""
    payment = await store.find(payment_id)
    if payment is None:
        raise PaymentNotFound(payment_id)
    answer = _decide(payment, reference)
    if answer is not None:
        return answer
    store.record(Resolution(payment.payment_id, payment.saga_id, operator, reference, note))
    if await uow.commit():
        written = await store.find(payment_id)
        assert written is not None and written.resolution is not None
        return Resolved(written.resolution, created=True)
    # Another resolution committed first (its unique index arbitrates): answer as if it had
    # been there when this one was asked for.
    raced = await store.find(payment_id)
    assert raced is not None
    answer = _decide(raced, reference)
    assert answer is not None, "the guard found a resolution"
    return answer

"""An operator's resolution of a payment left for a manual refund, on an in-memory store that
behaves as the adapter's partial unique index: recorded once, with who, the reference and the
note; the same reference again answers the first resolution; another reference, a payment that
needs no one, or none at all are refused and write nothing; two resolutions racing, one is
written and the other answered from it."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime

import pytest

from pagos.domain.payment import PaymentStatus
from pagos.usecases.resolve_payment import (
    NothingToResolve,
    PaymentNotFound,
    PaymentToResolve,
    Resolution,
    ResolvedOtherwise,
    resolve_payment,
)
from sagakit.fakes import FakeUnitOfWork

AT = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)


class FakeResolutions:
    """The payments and their one resolution each (the unique index on the action's target)."""

    def __init__(self) -> None:
        self.payments: dict[str, PaymentToResolve] = {}
        self.written: list[Resolution] = []
        self.racing: Resolution | None = None
        """Committed by another request between this one's read and its commit."""
        self._staged: Resolution | None = None

    def add(self, status: PaymentStatus, manual: bool) -> str:
        payment_id = str(uuid.uuid4())
        self.payments[payment_id] = PaymentToResolve(payment_id, f"saga-{payment_id}", status,
                                                     manual, None)
        return payment_id

    async def find(self, payment_id: str) -> PaymentToResolve | None:
        return self.payments.get(payment_id)

    def record(self, resolution: Resolution) -> None:
        self._staged = resolution

    def unit(self) -> FakeUnitOfWork:
        store = self

        class Unit(FakeUnitOfWork):
            async def commit(self) -> bool:
                staged, store._staged = store._staged, None
                assert staged is not None
                if store.racing is not None:
                    store._write(store.racing)
                    self.commit_result = False
                else:
                    store._write(staged)
                return await super().commit()

        return Unit("pagos")

    def _write(self, resolution: Resolution) -> None:
        written = dataclasses.replace(resolution, at=AT)
        self.written.append(written)
        self.payments[resolution.payment_id] = dataclasses.replace(
            self.payments[resolution.payment_id], resolution=written)


async def test_a_payment_marked_for_a_manual_refund_is_resolved_once_with_who_and_why() -> None:
    store = FakeResolutions()
    payment_id = store.add(PaymentStatus.REFUND_FAILED, manual=True)

    done = await resolve_payment(store.unit(), store, payment_id, operator="ops-ana",
                                 reference="FIN-2026-0042", note="refunded by bank transfer")

    assert done.created
    assert (done.resolution.operator, done.resolution.reference, done.resolution.note,
            done.resolution.at) == ("ops-ana", "FIN-2026-0042", "refunded by bank transfer", AT)
    assert len(store.written) == 1

    again = await resolve_payment(store.unit(), store, payment_id, operator="ops-bob",
                                  reference="FIN-2026-0042", note=None)
    assert not again.created and again.resolution == done.resolution
    assert len(store.written) == 1, "the same reference writes nothing more"


async def test_another_reference_for_a_resolved_payment_is_refused() -> None:
    store = FakeResolutions()
    payment_id = store.add(PaymentStatus.REFUND_FAILED, manual=True)
    await resolve_payment(store.unit(), store, payment_id, operator="ops", reference="A",
                          note=None)
    with pytest.raises(ResolvedOtherwise) as refused:
        await resolve_payment(store.unit(), store, payment_id, operator="ops", reference="B",
                              note=None)
    assert refused.value.resolution.reference == "A" and len(store.written) == 1


@pytest.mark.parametrize("status", [PaymentStatus.CAPTURED, PaymentStatus.REFUNDED,
                                    PaymentStatus.CHARGE_FAILED, PaymentStatus.DECLINED])
async def test_a_payment_that_needs_no_one_is_refused(status: PaymentStatus) -> None:
    store = FakeResolutions()
    payment_id = store.add(status, manual=False)
    unit = store.unit()
    with pytest.raises(NothingToResolve) as refused:
        await resolve_payment(unit, store, payment_id, operator="ops", reference="R",
                              note=None)
    assert refused.value.status is status
    assert store.written == [] and unit.commits == 0


async def test_an_unknown_payment_is_not_found() -> None:
    store = FakeResolutions()
    with pytest.raises(PaymentNotFound):
        await resolve_payment(store.unit(), store, str(uuid.uuid4()), operator="ops",
                              reference="R", note=None)


@pytest.mark.parametrize(("theirs", "created_error"), [("R", None), ("OTHER", ResolvedOtherwise)])
async def test_two_resolutions_racing_one_is_written(theirs: str,
                                                     created_error: type[Exception] | None
                                                     ) -> None:
    store = FakeResolutions()
    payment_id = store.add(PaymentStatus.REFUND_FAILED, manual=True)
    payment = store.payments[payment_id]
    store.racing = Resolution(payment_id, payment.saga_id, "ops-bob", theirs, None)
    if created_error is None:
        done = await resolve_payment(store.unit(), store, payment_id, operator="ops-ana",
                                     reference="R", note=None)
        assert not done.created and done.resolution.operator == "ops-bob"
    else:
        with pytest.raises(created_error):
            await resolve_payment(store.unit(), store, payment_id, operator="ops-ana",
                                  reference="R", note=None)
    assert [r.operator for r in store.written] == ["ops-bob"]

"""What pagos' use cases ask of what lies outside them, in their own terms.

- ``PaymentStore``: a saga's payment as the event handlers read and change it, in their unit of
  work (``sagakit.ports.UnitOfWorkPort``).
- ``PaymentWork`` and ``PaymentUnits``: the payments as the gateway worker leases them, marks
  their calls sent and records the calls' outcomes, each in a unit of work of its own.
- ``PaymentGateway``: the gateway's charge and refund calls.
- ``PaymentTokenOpener``: the private keys that open the payment token pedidos sealed.
- ``ChargeCalls``: the gateway worker as the StockVerificado handler sees it, a slot for a
  call started right after the handler's commit.

``pagos.adapters`` implements them on PostgreSQL and HTTP; the unit tests' fakes
(services/pagos/tests/unit/fakes.py) in memory. How a write reaches the database (run at once
under the lock its handler holds, or staged on the unit of work's commit statement, guarded)
is the adapter's business; which of the two a method does is part of its contract here,
because it decides what the handler's ``commit`` returns.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from pagos.domain.payment import Outcome, Payment, PaymentStatus
from saga_contracts.sealing import Binding
from sagakit.dead_letters import DeadLetter
from sagakit.ports import UnitOfWorkPort


class PaymentTokenOpener(Protocol):
    """Opens a payment token sealed for pagos (``saga_contracts.sealing.OpeningKeys``)."""

    def open(self, sealed: str, charge: Binding) -> str:
        """The token in the clear, if it was sealed for ``charge``. Raises
        ``saga_contracts.sealing.SealingError`` when it does not open (a key id pagos does not
        hold, a changed ciphertext, a token sealed for another charge): final for that token
        and that charge."""
        ...


class PaymentStore(Protocol):
    """A saga's payment, for the handlers of StockVerificado, StockAsignado, FalloAsignacion
    and OrdenCancelada."""

    async def read(self, saga_id: str) -> Payment | None:
        """The payment as it is now, without a lock; None when the saga has none."""
        ...

    async def lock(self, saga_id: str) -> Payment | None:
        """The payment, locked until the unit of work ends; None when the saga has none."""
        ...

    async def record_without_charge(self, *, saga_id: str, order_id: str | None,
                                    customer_id: str | None, status: PaymentStatus) -> bool:
        """Writes now a payment with no gateway work (a cancellation recorded before any
        charge), ``customer_id``'s; False when the saga already has one (its unique saga id
        arbitrates)."""
        ...

    async def move(self, payment: Payment, to: PaymentStatus, *, due_now: bool,
                   clear_token: bool) -> bool:
        """Writes now ``payment``'s new status, only if its status is still the one it was
        read with; its gateway work falls due now if ``due_now``, and its payment token is
        cleared if ``clear_token``. False when the status had moved."""
        ...

    async def record_allocation_failed(self, payment: Payment) -> None:
        """Writes now that inventario's allocation failed for ``payment`` (the first time is
        kept); its handler holds the row's lock."""
        ...

    def record_stock_allocated(self, decided_on: Payment) -> None:
        """Writes with the unit of work's commit that inventario allocated the payment's stock,
        only if the payment is still as it was ``decided_on`` (its status, no allocation
        recorded, and a failure recorded or not alike): otherwise nothing is written, the
        inbox row included, and the commit returns False."""
        ...

    async def charge_again(self, saga_id: str, token: str) -> bool:
        """Writes now a CHARGE_FAILED payment due for charging again now, with ``token``, no
        lease and a fresh count of attempts; False when it is not CHARGE_FAILED any more."""
        ...

    def new_charge(self, *, saga_id: str, order_id: str, customer_id: str | None,
                   amount: Decimal, currency: str, token: str, lease_s: float | None,
                   trigger: dict[str, Any]) -> None:
        """A payment of ``customer_id`` due for charging now, written with the unit of work's
        commit, unless the saga has one already (its unique saga id arbitrates: nothing is
        written then, and the commit goes through). With ``lease_s`` it is created leased to
        the caller's gateway call for that long. ``created`` says, after the commit, which it
        was."""
        ...

    def created(self) -> Payment | None:
        """After the commit: the payment ``new_charge`` wrote, or None if the saga had one."""
        ...


@dataclass(frozen=True)
class CallOutcome:
    """What a gateway call's outcome writes on its payment (a field left None, or False,
    leaves its column as it is)."""

    attempt: dict[str, Any]
    """The call, appended to the payment's attempt log."""
    lease_until: datetime | None
    """The call's lease: it ends with the outcome, if no other call holds the payment since."""
    schedules: bool
    """Whether the outcome decides the payment's next work: due ``retry_in_s`` from now, or
    none when that is None. An outcome that does not schedule leaves the work due as it is."""
    lease_held: bool = False
    """Written only while the call still holds its lease (``lease_until``): an outcome that
    stands in for one whose recording failed, which may have been written after all (its
    commit ends the lease)."""
    retry_in_s: float | None = None
    status: PaymentStatus | None = None
    clear_token: bool = False
    manual_refund_required: bool = False
    charge_attempts: int | None = None
    resolve_attempts: int | None = None
    refund_attempts: int | None = None
    charge_id: str | None = None
    decline_code: str | None = None
    refunded: bool = False
    """The refund was made: ``refund_id`` and ``amount_refunded`` are written (None included)."""
    disowned: bool = False
    """The payment's customer is cleared: the charge's token was not sealed for the customer
    the event named, or not for this charge at all (operators alone see the payment)."""
    refund_id: str | None = None
    amount_refunded: Decimal | None = None


class PaymentWork(Protocol):
    """The payments with gateway work due, for the gateway worker."""

    async def claim_due(self, limit: int, lease_s: float) -> list[Payment]:
        """Leases for ``lease_s`` up to ``limit`` payments whose work (a charge, the
        resolution of a cancelled charge, a refund) is due and not leased; workers share."""
        ...

    async def seconds_to_next_due(self) -> float | None:
        """How long until the earliest scheduled work falls due, or a lease on work runs out
        (None: nothing is scheduled)."""
        ...

    async def mark_charge_sent(self, payment: Payment) -> Payment | None:
        """The payment as the charge call about to be sent finds it, marked as maybe charged
        from now on; None if the call must not be sent (the payment has no charge work any
        more, or its lease is no longer this call's)."""
        ...

    async def read(self, saga_id: str) -> Payment | None:
        """The payment as it is now, without a lock."""
        ...

    def record_outcome(self, decided_on: Payment, outcome: CallOutcome) -> None:
        """Writes ``outcome`` with the unit of work's commit, only if the payment is still as
        it was ``decided_on`` (its status and attempt counts) and, for an outcome that says
        so (``lease_held``), its call still holds its lease: otherwise nothing is written,
        events and dead letters included, and the commit returns False."""
        ...

    def dead_letter(self, letter: DeadLetter) -> None:
        """Parks ``letter`` in the outbox with the unit of work's commit."""
        ...


class PaymentUnits(Protocol):
    """Opens a unit of work with the payments on it; ``reads_outside_transaction``: its reads
    take no lock and its writes are its commit alone (``sagakit.store.unit_of_work``)."""

    def __call__(self, *, reads_outside_transaction: bool = False
                 ) -> AbstractAsyncContextManager[tuple[UnitOfWorkPort, PaymentWork]]:
        ...


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


class PaymentGateway(Protocol):
    """The payment gateway's calls, made with no transaction open; a call with the same
    idempotency key as an earlier one answers what the earlier one did."""

    async def charge(self, *, amount_minor: int, currency: str, token: str,
                     idempotency_key: str, saga_id: str) -> ChargeResult:
        ...

    async def refund(self, *, charge_id: str, amount_minor: int,
                     idempotency_key: str) -> RefundResult:
        ...


@dataclass
class Slot:
    """One gateway call's place in the worker's concurrency, reserved before a transaction that
    leases new work; ``ChargeCalls.start`` uses it, ``ChargeCalls.release`` gives it back
    unused."""

    held: bool = True


class ChargeCalls(Protocol):
    """The gateway worker, for a handler that creates a charge: a free slot lets the handler's
    transaction lease the charge and the call start right after its commit."""

    @property
    def lease_s(self) -> float:
        """How long a gateway call holds its payment."""
        ...

    def reserve(self) -> Slot | None:
        """A slot for a call, or None when every slot is taken or no worker runs here."""
        ...

    def start(self, slot: Slot, payment: Payment) -> None:
        """Begins the call for ``payment``, leased by the transaction that just committed."""
        ...

    def release(self, slot: Slot) -> None:
        """Gives ``slot`` back unused; a no-op once it was used."""
        ...

    def kick(self) -> None:
        """Work may be due now."""
        ...

"""The sagas this process wrote last, as its own commit statements returned them.

A tracked event is decided on the saga's status. Reading it back before every guarded write
cost pedidos a round trip per event (three per saga, one of them on the saga's critical path),
for a row that this process had itself written a moment before, in the common case. The entry
is only a hint, never the truth: every write decided on it is guarded by the status it names
and by whether it shows the stock allocated before the payment, and neither ever returns to a
value it left (the machine only moves forward, an allocation is never unrecorded), so an
entry made stale by another instance, a deadline or a cancellation fails its guard, is
forgotten, and the event is decided again on the row read from the database.

One per process: the composition root (pedidos.app) builds it and hands it to the use cases.
"""

from __future__ import annotations

from collections import OrderedDict

from pedidos.domain.order import TERMINAL
from pedidos.usecases.ports import SagaState

# Active sagas of one instance: a few hundred at saturation here, tens of thousands only behind
# a long outage, when reading a few rows back costs nothing that matters.
DEFAULT_CAPACITY = 10_000


class KnownSagas:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._rows: OrderedDict[str, SagaState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, saga_id: str) -> SagaState | None:
        return self._rows.get(saga_id)

    def remember(self, saga: SagaState) -> None:
        """``saga`` as a commit of this process left it. A terminal saga is not kept: nothing
        moves it any more, and a late event's annotation can read it."""
        if saga.status in TERMINAL:
            self._rows.pop(saga.saga_id, None)
            return
        self._rows[saga.saga_id] = saga
        self._rows.move_to_end(saga.saga_id)
        while len(self._rows) > self.capacity:
            self._rows.popitem(last=False)

    def forget(self, saga_id: str) -> None:
        self._rows.pop(saga_id, None)


"""The commit statement of every shape of pedidos' staged writes, as sent, is the one pinned in
``staged_write_statements.json`` by digest (saga_harness.staged_writes). A change to a write's
SQL shows here; one that is meant is pinned again by running this module
(``python <this file>``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

from pedidos.adapters import order_repository as r
from pedidos.domain.order import OrderStatus
from saga_harness.staged_writes import PinnedStatements, StagedWriteStatementsSuite
from sagakit.store import WriteShape

_COLUMNS = [(), ("cancel_reason",), ("charge_id", "refund_status")]


def _shapes() -> Iterator[tuple[str, WriteShape]]:
    for key in (False, True):
        yield f"creation(idempotency_key={key})", r._creation(key)
    for to, columns, timed, notified, acted in itertools.product(
            OrderStatus, _COLUMNS, (False, True), (False, True), (False, True)):
        yield (f"transition({to.value}, {columns}, timed={timed}, notified={notified}, "
               f"acted={acted})", r._transition(to, columns, timed, notified, acted))
    for columns in _COLUMNS:
        yield f"unmoved({columns})", r._unmoved(columns)
    yield "allocation()", r._unmoved((), allocated=True)


STATEMENTS = PinnedStatements("pedidos", Path(__file__).with_name("staged_write_statements.json"),
                              _shapes)


class TestStagedWriteStatements(StagedWriteStatementsSuite):
    statements = STATEMENTS


if __name__ == "__main__":
    STATEMENTS.pin()

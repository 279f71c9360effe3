"""The commit statement of every shape of pagos' staged writes, as sent, is the one pinned in
``staged_write_statements.json`` by digest (saga_harness.staged_writes). A change to a write's
SQL shows here; one that is meant is pinned again by running this module
(``python <this file>``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

from pagos.adapters import payment_repository as r
from pagos.adapters import resolutions
from saga_harness.staged_writes import PinnedStatements, StagedWriteStatementsSuite
from sagakit.store import WriteShape

_COLUMNS = [(), ("status",), ("charge_attempts", "charge_id", "payment_token", "status"),
            ("amount_refunded", "refund_attempts", "refund_id")]


def _shapes() -> Iterator[tuple[str, WriteShape]]:
    for leased in (False, True):
        yield f"new_payment(leased={leased})", r._new_payment(leased)
    for columns, schedules, held in itertools.product(_COLUMNS, (False, True), (False, True)):
        yield (f"outcome({columns}, schedules={schedules}, lease_held={held})",
               r._outcome(columns, schedules, held))
    yield "stock_allocated", r._STOCK_ALLOCATED
    yield "resolution", resolutions._RECORD


STATEMENTS = PinnedStatements("pagos", Path(__file__).with_name("staged_write_statements.json"),
                              _shapes)


class TestStagedWriteStatements(StagedWriteStatementsSuite):
    statements = STATEMENTS


if __name__ == "__main__":
    STATEMENTS.pin()

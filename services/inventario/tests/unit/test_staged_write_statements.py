"""The commit statement of every shape of inventario's staged writes, as sent, is the one pinned in
``staged_write_statements.json`` by digest (saga_harness.staged_writes). A change to a write's
SQL shows here; one that is meant is pinned again by running this module
(``python <this file>``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from inventario.adapters import stock_repository as r
from saga_harness.staged_writes import PinnedStatements, StagedWriteStatementsSuite
from sagakit.store import WriteShape


def _shapes() -> Iterator[tuple[str, WriteShape]]:
    yield "stock_check", r._STOCK_CHECK
    yield "reserving_check", r._RESERVING_CHECK
    yield "auto_check", r._AUTO_CHECK
    yield "allocation", r._ALLOCATION


STATEMENTS = PinnedStatements("inventario", Path(__file__).with_name("staged_write_statements.json"),
                              _shapes)


class TestStagedWriteStatements(StagedWriteStatementsSuite):
    statements = STATEMENTS


if __name__ == "__main__":
    STATEMENTS.pin()

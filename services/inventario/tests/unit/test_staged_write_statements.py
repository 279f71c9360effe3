"""The commit statement of every shape of inventario's staged writes, as sent, is the one pinned in
``staged_write_statements.json`` by digest (saga_harness.staged_writes). A change to a write's
SQL shows here; one that is meant is pinned again by running this module
(``python <this file>``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from inventario.adapters import stock_repository as r
from saga_harness.staged_writes import PinnedStatements
from sagakit.store import WriteShape


def _shapes() -> Iterator[tuple[str, WriteShape]]:
    yield "stock_check", r._STOCK_CHECK
    yield "reserving_check", r._RESERVING_CHECK
    yield "allocation", r._ALLOCATION


PINNED = PinnedStatements("inventario", Path(__file__).with_name("staged_write_statements.json"),
                          _shapes)


def test_every_staged_write_sends_the_statement_pinned() -> None:
    PINNED.assert_pinned()


def test_every_shape_is_built_once_so_its_statement_is_compiled_once() -> None:
    PINNED.assert_built_once()


if __name__ == "__main__":
    PINNED.pin()

"""The commit statement of every shape of pedidos' staged writes, as sent: each shape's
statement (with and without the inbox and outbox rows, notifying or not) is the one pinned in
``staged_write_statements.json`` by digest. A change to a write's SQL shows here; one that is
meant is pinned again by running this module (``python <this file>``)."""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from pedidos.adapters import order_repository as r
from pedidos.domain.order import OrderStatus
from sagakit.store import WriteShape
from sagakit.store.commit_statement import commit_statement

PINNED = Path(__file__).with_name("staged_write_statements.json")
_COLUMNS = [(), ("cancel_reason",), ("charge_id", "refund_status")]


def _digest(shape: WriteShape) -> str:
    texts = [commit_statement("pedidos", claim, outbox, shape, notify).text
             for claim, outbox, notify in ((True, True, True), (True, True, False),
                                           (False, False, False))]
    return hashlib.sha256("\n--\n".join(texts).encode()).hexdigest()


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


def rendered() -> dict[str, str]:
    return {name: _digest(shape) for name, shape in _shapes()}


def test_every_staged_write_sends_the_statement_pinned() -> None:
    pinned = json.loads(PINNED.read_text())
    now = rendered()
    assert now.keys() == pinned.keys()
    assert [k for k in now if now[k] != pinned[k]] == []


def test_every_shape_is_built_once_so_its_statement_is_compiled_once() -> None:
    # The commit statement and its driver form are kept per shape: a shape built anew per
    # call would still find them (shapes are equal by value) but pay for its build each time.
    again = dict(_shapes())
    assert [name for name, shape in _shapes() if again[name] is not shape] == []


if __name__ == "__main__":
    PINNED.write_text(json.dumps(rendered(), indent=1, sort_keys=True) + "\n")
    sys.exit(0)

"""The commit statement of every shape of pagos' staged writes, as sent: each shape's
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

from pagos.adapters import payment_repository as r
from pagos.adapters import resolutions
from sagakit.store import WriteShape
from sagakit.store.commit_statement import commit_statement

PINNED = Path(__file__).with_name("staged_write_statements.json")
_COLUMNS = [(), ("status",), ("charge_attempts", "charge_id", "payment_token", "status"),
            ("amount_refunded", "refund_attempts", "refund_id")]


def _digest(shape: WriteShape) -> str:
    texts = [commit_statement("pagos", claim, outbox, shape, notify).text
             for claim, outbox, notify in ((True, True, True), (True, True, False),
                                           (False, False, False))]
    return hashlib.sha256("\n--\n".join(texts).encode()).hexdigest()


def _shapes() -> Iterator[tuple[str, WriteShape]]:
    for leased in (False, True):
        yield f"new_payment(leased={leased})", r._new_payment(leased)
    for columns, schedules, held in itertools.product(_COLUMNS, (False, True), (False, True)):
        yield (f"outcome({columns}, schedules={schedules}, lease_held={held})",
               r._outcome(columns, schedules, held))
    yield "stock_allocated", r._STOCK_ALLOCATED
    yield "resolution", resolutions._RECORD


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

"""The commit statements of a service's staged writes, pinned by digest: the tests each
service's ``tests/unit/test_staged_write_statements.py`` runs on the shapes it names
(``StagedWriteStatementsSuite``).

Each shape's statement is rendered as sent (with the inbox and outbox rows, notifying or not,
and without them) and its digest compared with the one pinned in the JSON file beside the test
(``staged_write_statements.json``). A change to a write's SQL shows there; one that is meant is
pinned again by running that test module as a script, which calls ``PinnedStatements.pin``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from sagakit.store import WriteShape
from sagakit.store.commit_statement import commit_statement

# (claim, outbox, notify): every way a unit of work sends a shape.
_SENT_AS = ((True, True, True), (True, True, False), (False, False, False))


def digest(service: str, shape: WriteShape) -> str:
    """The SHA-256 of ``shape``'s commit statements in ``service``'s schema, every way sent."""
    texts = [commit_statement(service, claim, outbox, shape, notify).text
             for claim, outbox, notify in _SENT_AS]
    return hashlib.sha256("\n--\n".join(texts).encode()).hexdigest()


@dataclass(frozen=True)
class PinnedStatements:
    """``service``'s staged writes, as ``shapes`` names them, pinned in the file ``pinned``."""

    service: str
    pinned: Path
    shapes: Callable[[], Iterable[tuple[str, WriteShape]]]

    def rendered(self) -> dict[str, str]:
        return {name: digest(self.service, shape) for name, shape in self.shapes()}

    def pin(self) -> None:
        """Writes the digests of the statements as they are now."""
        self.pinned.write_text(json.dumps(self.rendered(), indent=1, sort_keys=True) + "\n")


class StagedWriteStatementsSuite:
    """The tests of a service's pinned statements: its test class derives from this one and
    sets ``statements``."""

    statements: ClassVar[PinnedStatements]

    def test_every_staged_write_sends_the_statement_pinned(self) -> None:
        pinned = json.loads(self.statements.pinned.read_text())
        now = self.statements.rendered()
        assert now.keys() == pinned.keys()
        assert [k for k in now if now[k] != pinned[k]] == []

    def test_every_shape_is_built_once_so_its_statement_is_compiled_once(self) -> None:
        # The commit statement and its driver form are kept per shape: a shape built anew per
        # call would still find them (shapes are equal by value) but pay for its build each time.
        again = dict(self.statements.shapes())
        assert [name for name, shape in self.statements.shapes() if again[name] is not shape] == []

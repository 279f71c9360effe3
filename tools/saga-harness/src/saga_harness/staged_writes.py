"""The commit statements of a service's staged writes, pinned by digest: what each service's
``tests/unit/test_staged_write_statements.py`` checks, on the shapes it names.

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

    def assert_pinned(self) -> None:
        """Every shape is pinned, nothing else is, and each one's statement is its pinned one."""
        pinned = json.loads(self.pinned.read_text())
        now = self.rendered()
        assert now.keys() == pinned.keys()
        assert [k for k in now if now[k] != pinned[k]] == []

    def assert_built_once(self) -> None:
        """Each shape is the same object every time it is asked for. The commit statement and
        its driver form are kept per shape: a shape built anew per call would still find them
        (shapes are equal by value) but pay for its build each time."""
        again = dict(self.shapes())
        assert [name for name, shape in self.shapes() if again[name] is not shape] == []

    def pin(self) -> None:
        """Writes the digests of the statements as they are now."""
        self.pinned.write_text(json.dumps(self.rendered(), indent=1, sort_keys=True) + "\n")

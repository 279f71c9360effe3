"""The README fits on a screen and the benchmark page stays a page: what they do not say goes
to the pages they link (docs/usage.md, docs/deploy.md, docs/operations.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LONGEST = {"README.md": 150, "docs/benchmarks.md": 200}


@pytest.mark.parametrize(("page", "lines"), sorted(LONGEST.items()))
def test_the_page_is_no_longer_than_its_limit(page: str, lines: int) -> None:
    length = len((ROOT / page).read_text(encoding="utf-8").splitlines())
    assert length <= lines, f"{page} has {length} lines, more than {lines}: move some to docs/"

"""The repository's text leads nowhere outside it: no issue numbers (the tracker is not part of
a clone) and no "this machine"/"this VM" (a reader's machine is another one)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"\bissues? #?\d+|\bthis (?:VM|machine)\b", re.IGNORECASE)
# Third-party text kept as it was published (vendored schemas, lock files).
KEPT_AS_PUBLISHED = ("deploy/k8s/schemas/", "uv.lock")


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    names = [n for n in out.stdout.decode().split("\0") if n]
    here = Path(__file__).resolve()  # its own examples below
    return [ROOT / n for n in names
            if not n.startswith(KEPT_AS_PUBLISHED) and (ROOT / n).resolve() != here]


def test_no_reference_leads_outside_the_repository() -> None:
    found = []
    for path in _tracked():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files (images), and files deleted in the working tree
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_check_finds_what_it_looks_for() -> None:
    assert OUTSIDE.search("a regression (issue 6): fixed")
    assert OUTSIDE.search("on this VM an idle vCPU halts")
    assert not OUTSIDE.search("a tissue 6 cm wide, the machine's own clock")

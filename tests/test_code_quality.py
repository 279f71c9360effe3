"""The code base stays typed and linted: ruff and mypy run as part of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff() -> None:
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy() -> None:
    # Every service and tool by glob, as in the Makefile's typecheck target: a new one is
    # checked at once.
    parts = sorted(p.relative_to(ROOT).as_posix()
                   for p in [*ROOT.glob("services/*/src"), *ROOT.glob("tools/*/src")])
    res = subprocess.run([sys.executable, "-m", "mypy", "libs/sagakit/src",
                          "libs/saga-contracts/src", *parts],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr

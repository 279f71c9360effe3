"""The code base stays typed and linted: ruff, import-linter and mypy run as part of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff() -> None:
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_import_contracts() -> None:
    # The layers, no import cycle in sagakit, the services on sagakit's public surface
    # ([tool.importlinter] in pyproject.toml); lint-imports is installed beside this Python.
    lint_imports = Path(sys.executable).parent / "lint-imports"
    res = subprocess.run([str(lint_imports), "--no-logo", "--no-cache"], cwd=ROOT,
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

"""The repository's scripts imported by path, for tests of their functions: deploy/configuration.py
is run as a file (``python deploy/configuration.py``), not installed as a package."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from saga_harness.config import ROOT


def load(path: str, name: str) -> ModuleType:
    """The script at ``path`` (from the checkout's root), executed afresh as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, loaded)
    spec.loader.exec_module(loaded)
    return loaded

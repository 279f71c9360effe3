"""Unit tests see the defaults, whatever the environment the suite runs in sets."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(os.environ):
        if var.startswith(("SAGA_", "SCHEMA_REGISTRY_")):
            monkeypatch.delenv(var)

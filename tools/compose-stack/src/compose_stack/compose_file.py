"""docker-compose.yml as data, read as docker compose reads it when the environment sets none
of its defaulted variables (``${NAME:-default}``: the host ports, the images)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from compose_stack.settings import COMPOSE_FILE

DEFAULTED = re.compile(r"\$\{(?P<name>[A-Z0-9_]+):-(?P<default>[^}]+)\}")


def defaults() -> dict[str, str]:
    """Every defaulted variable of the file, with its default."""
    return {m["name"]: m["default"] for m in DEFAULTED.finditer(COMPOSE_FILE.read_text())}


def load() -> dict[str, Any]:
    """The file with every defaulted variable at its default (``${NAME:?message}`` left as it
    is: those are the secrets, which have none)."""
    document: dict[str, Any] = yaml.safe_load(
        DEFAULTED.sub(lambda m: m["default"], COMPOSE_FILE.read_text()))
    return document

"""docker-compose.yml as data, read as docker compose reads it: ``${NAME:-default}`` is the
variable's value when it is set and not empty, else its default (``${NAME:?message}`` is left as
it is: those are the secrets, which have no default and name no image)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from compose_stack.settings import COMPOSE_FILE

DEFAULTED = re.compile(r"\$\{(?P<name>[A-Z0-9_]+):-(?P<default>[^}]+)\}")


def defaults() -> dict[str, str]:
    """Every defaulted variable of the file, with its default."""
    return {m["name"]: m["default"] for m in DEFAULTED.finditer(COMPOSE_FILE.read_text())}


def load(variables: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The file with every defaulted variable at its value in ``variables`` or, when that
    does not set it, at its default."""
    values = variables or {}
    document: dict[str, Any] = yaml.safe_load(
        DEFAULTED.sub(lambda m: values.get(m["name"]) or m["default"], COMPOSE_FILE.read_text()))
    return document


@dataclass(frozen=True)
class ImageBuild:
    """One image the file builds, and the services that run it."""

    image: str
    context: Path
    dockerfile: Path
    args: tuple[tuple[str, str], ...]
    services: tuple[str, ...]


def image_builds(variables: Mapping[str, str] | None = None) -> list[ImageBuild]:
    """Each image the file builds, once: several services run one image (a service's API, its
    worker and its migrations), and building it once per service builds the same image at once
    several times (docker compose dedupes them; podman-compose does not)."""
    found: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for name, service in load(variables)["services"].items():
        build = service.get("build")
        if build is None:
            continue
        image = service["image"]
        earlier = found.setdefault(image, (build, []))
        if earlier[0] != build:
            raise ValueError(f"{image} is built two ways ({earlier[1][0]} and {name})")
        earlier[1].append(name)
    root = COMPOSE_FILE.parent
    return [ImageBuild(image=image, context=root / build.get("context", "."),
                       dockerfile=root / build.get("dockerfile", "Dockerfile"),
                       args=tuple(sorted((k, str(v)) for k, v in build.get("args", {}).items())),
                       services=tuple(services))
            for image, (build, services) in found.items()]

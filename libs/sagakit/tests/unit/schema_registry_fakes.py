"""A schema registry in memory, counting what it is asked; down or hanging on demand."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from saga_contracts.registry import all_schemas
from saga_contracts.schema_artifacts import artifact_id
from sagakit.schema_registry import RegistryUnavailable


class FakeRegistry:
    where = "the fake registry (group saga-events)"

    def __init__(self, artifacts: dict[str, dict[str, dict[str, Any]]] | None = None) -> None:
        self.artifacts = artifacts if artifacts is not None else contracts()
        self.requests: list[tuple[str, ...]] = []
        self.down = False
        self.hang = False
        self.closed = False

    def hold(self, event_type: str, version: str, document: dict[str, Any]) -> None:
        self.artifacts.setdefault(artifact_id(event_type, version), {})[version] = document

    async def _asked(self, *what: str) -> None:
        self.requests.append(what)
        await asyncio.sleep(0)  # concurrent askers meet here
        if self.hang:
            await asyncio.Event().wait()
        if self.down:
            raise RegistryUnavailable(f"no answer from {self.where}")

    async def versions(self, artifact: str) -> list[str] | None:
        await self._asked("versions", artifact)
        held = self.artifacts.get(artifact)
        return None if held is None else list(held)

    async def document(self, artifact: str, version: str) -> dict[str, Any] | None:
        await self._asked("document", artifact, version)
        return copy.deepcopy(self.artifacts.get(artifact, {}).get(version))

    async def close(self) -> None:
        self.closed = True


def contracts() -> dict[str, dict[str, dict[str, Any]]]:
    """Every version of the contracts' package, as ``sagactl schemas register`` puts them."""
    held: dict[str, dict[str, dict[str, Any]]] = {}
    for event_type, versions in all_schemas().items():
        for schema in versions:
            held.setdefault(artifact_id(event_type, schema.version), {})[schema.version] = \
                copy.deepcopy(schema.document)
    return held

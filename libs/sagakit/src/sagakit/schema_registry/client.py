"""The two reads a service makes of Apicurio Registry's REST API (v3), as its reader principal:
the versions of an artifact and the schema of one version. Async (httpx), never blocking the
event loop, each request bounded by the settings' timeout.

A 404 is an answer (the registry does not hold it: None); no answer in time, a refused
connection, any other status and a body that is not a JSON object are ``RegistryUnavailable``:
the registry could not be asked, which says nothing about the schema."""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import Any, Protocol

import httpx

from sagakit.schema_registry.settings import SchemaRegistrySettings

PAGE = 1000


class RegistryUnavailable(Exception):
    """The registry did not answer, or not with what its API answers."""


class RegistryReads(Protocol):
    """What ``sagakit.schema_registry.schemas.Schemas`` asks of the registry (a fake in unit
    tests)."""

    where: str
    """For messages: the registry's URL and group (never its credentials)."""

    async def versions(self, artifact: str) -> list[str] | None: ...

    async def document(self, artifact: str, version: str) -> dict[str, Any] | None: ...

    async def close(self) -> None: ...


def _path(*parts: str) -> str:
    return "".join("/" + urllib.parse.quote(p, safe="") for p in parts)


class RegistryClient:
    def __init__(self, settings: SchemaRegistrySettings) -> None:
        if settings.url is None:
            raise ValueError("no SCHEMA_REGISTRY_URL")
        self.group = settings.group
        self.timeout_s = settings.timeout_s
        self.where = f"{settings.url} (group {settings.group})"
        auth = None
        if settings.username is not None and settings.password is not None:
            auth = httpx.BasicAuth(settings.username, settings.password.get_secret_value())
        self._http = httpx.AsyncClient(base_url=settings.url, auth=auth,
                                       timeout=settings.timeout_s,
                                       headers={"Accept": "application/json"})

    async def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        try:
            # The whole exchange bounded, not each read: a registry that trickles its answer
            # must not hold a partition past the timeout either.
            response = await asyncio.wait_for(self._http.get(path, params=params),
                                              self.timeout_s)
        except (TimeoutError, httpx.HTTPError) as exc:
            raise RegistryUnavailable(f"no answer from {self.where}: {exc!r}") from None
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise RegistryUnavailable(f"{self.where} answered GET {path} with HTTP "
                                      f"{response.status_code}")
        try:
            found = response.json()
        except ValueError:
            raise RegistryUnavailable(f"{self.where} answered GET {path} with something not "
                                      "JSON") from None
        if not isinstance(found, dict):
            raise RegistryUnavailable(f"{self.where} answered GET {path} with JSON that is not "
                                      "an object")
        return found

    async def versions(self, artifact: str) -> list[str] | None:
        found = await self._get(_path("groups", self.group, "artifacts", artifact, "versions"),
                                {"limit": str(PAGE)})
        if found is None:
            return None
        try:
            return [str(v["version"]) for v in found["versions"]]
        except (KeyError, TypeError):
            raise RegistryUnavailable(f"{self.where}: the versions of {artifact} are not a "
                                      "list of versions") from None

    async def document(self, artifact: str, version: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = await self._get(_path(
            "groups", self.group, "artifacts", artifact, "versions", version, "content"))
        return found

    async def close(self) -> None:
        await self._http.aclose()

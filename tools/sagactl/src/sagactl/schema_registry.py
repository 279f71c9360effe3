"""The schema registry as sagactl reaches it: Apicurio Registry's REST API (v3), with HTTP basic
authentication as the principal the command needs.

- URL: SAGACTL_REGISTRY_URL (``…/apis/registry/v3``); in a checkout beside a local stack, its
  registry's (``make credentials``, ``schema_registry.url``).
- Who: SAGACTL_REGISTRY_USERNAME and SAGACTL_REGISTRY_PASSWORD; in a checkout, the local
  stack's ``deployer`` for what writes (``schemas register``) and ``reader`` for what reads.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol

from sagactl.connection import local_stack_credentials


class RegistryError(Exception):
    """The registry answered with an error (its problem details in ``body``), or not at all
    (``status`` 0)."""

    def __init__(self, status: int, body: dict[str, Any], what: str) -> None:
        self.status = status
        self.body = body
        self.what = what
        detail = body.get("detail") or body.get("title") or body.get("message") or ""
        super().__init__(f"{what}: HTTP {status} {detail}".rstrip())


class RegistryApi(Protocol):
    """What the commands ask of the registry: JSON in, JSON out, ``RegistryError`` on a refusal."""

    def get(self, path: str, query: dict[str, str] | None = None) -> Any: ...

    def post(self, path: str, body: Any, query: dict[str, str] | None = None) -> Any: ...

    def put(self, path: str, body: Any) -> Any: ...


@dataclass(frozen=True)
class Registry:
    url: str
    username: str | None
    password: str | None

    def _request(self, method: str, path: str, body: Any = None,
                 query: dict[str, str] | None = None) -> Any:
        url = self.url + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.username is not None and self.password is not None:
            pair = f"{self.username}:{self.password}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        what = f"{method} {path}"
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
        except urllib.error.HTTPError as refused:
            raw = refused.read()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = {"detail": raw.decode(errors="replace")[:500]}
            raise RegistryError(refused.code, problem if isinstance(problem, dict)
                                else {"detail": str(problem)}, what) from None
        except OSError as exc:
            raise RegistryError(0, {"detail": f"no answer from {self.url} ({exc})"},
                                what) from None
        return json.loads(raw) if raw.strip() else None

    def get(self, path: str, query: dict[str, str] | None = None) -> Any:
        return self._request("GET", path, query=query)

    def post(self, path: str, body: Any, query: dict[str, str] | None = None) -> Any:
        return self._request("POST", path, body, query)

    def put(self, path: str, body: Any) -> Any:
        return self._request("PUT", path, body)

    def delete(self, path: str) -> Any:
        return self._request("DELETE", path)


def registry(principal: str) -> Registry:
    """The registry, as ``principal`` (``deployer`` or ``reader``) of a local stack unless the
    SAGACTL_REGISTRY_* variables name another."""
    url = os.environ.get("SAGACTL_REGISTRY_URL")
    username = os.environ.get("SAGACTL_REGISTRY_USERNAME")
    password = os.environ.get("SAGACTL_REGISTRY_PASSWORD")
    if url and username:
        return Registry(url.rstrip("/"), username, password)
    stack = local_stack_credentials()
    if stack is None:
        if url:
            return Registry(url.rstrip("/"), username, password)
        raise SystemExit("sagactl: set SAGACTL_REGISTRY_URL (…/apis/registry/v3), "
                         "SAGACTL_REGISTRY_USERNAME and SAGACTL_REGISTRY_PASSWORD")
    made = stack["schema_registry"]
    who = made["principals"].get(principal)
    if who is None and not username:
        raise SystemExit(f"sagactl: the local stack has not made its registry principal "
                         f"{principal!r} yet (make up); or set SAGACTL_REGISTRY_USERNAME and "
                         "SAGACTL_REGISTRY_PASSWORD")
    return Registry((url or made["url"]).rstrip("/"), username or who["username"],
                    password if username else who["password"])

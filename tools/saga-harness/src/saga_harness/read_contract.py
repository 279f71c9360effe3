"""The read contract as the repository describes it, and as a database publishes it.

Each service describes the views it publishes (``services/<service>/read-contract.json``: per
view, its columns in order, each with its PostgreSQL type as ``format_type`` spells it). A view
once published keeps its columns; another shape is a new view (``_v2``), and the old one may
only go once no reader in the repository uses it (docs/operations.md, "The read contract").
A reader is code that names ``<service>_read.<view>``: the tools, the services' own sources
(the console), the Grafana dashboards.

``python -m saga_harness.read_contract`` prints the description of the views a database
publishes (the local stack's), to copy into a service's file when a view is added.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import asyncpg

from saga_harness import config

SERVICES = ("pedidos", "inventario", "pagos")
Columns = list[tuple[str, str]]
Views = dict[str, Columns]

_READER_FILES = ("tools/*/src/**/*.py", "services/*/src/**/*.py", "services/*/src/**/*.html",
                 "deploy/grafana/*.json")
_VIEW_NAME = re.compile(r"\b(pedidos|inventario|pagos)_read\.([a-z_0-9]+)")
# sagactl's reads name each service's schema in a loop: ``{svc}_read.outbox_v1``.
_EVERY_SERVICE = re.compile(r"\{svc\}_read\.([a-z_0-9]+)")


def contract_file(service: str, root: Path = config.ROOT) -> Path:
    return root / "services" / service / "read-contract.json"


def described(service: str, root: Path = config.ROOT) -> Views:
    views = json.loads(contract_file(service, root).read_text())["views"]
    return {name: [(c, t) for c, t in columns.items()] for name, columns in views.items()}


def readers(root: Path = config.ROOT) -> dict[tuple[str, str], list[str]]:
    """(service, view) -> the files of the repository that read it."""
    found: dict[tuple[str, str], list[str]] = {}
    for pattern in _READER_FILES:
        for path in sorted(root.glob(pattern)):
            text = path.read_text(errors="replace")
            named = {(m[1], m[2]) for m in _VIEW_NAME.finditer(text)}
            named |= {(svc, m[1]) for m in _EVERY_SERVICE.finditer(text) for svc in SERVICES}
            for key in named:
                found.setdefault(key, []).append(str(path.relative_to(root)))
    return found


async def published(conn: asyncpg.Connection, service: str) -> Views:
    """The views of ``<service>_read`` in the database, their columns in order."""
    rows = await conn.fetch(
        """SELECT c.relname AS view, a.attname AS column,
                  format_type(a.atttypid, a.atttypmod) AS type
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
           WHERE n.nspname = $1 AND c.relkind IN ('v', 'm')
           ORDER BY c.relname, a.attnum""", f"{service}_read")
    views: Views = {}
    for r in rows:
        views.setdefault(r["view"], []).append((r["column"], r["type"]))
    return views


def breaches(service: str, described: Views, published: Views,
             read_by: dict[tuple[str, str], list[str]]) -> list[str]:
    """How the database's views of ``service`` break its described contract: a view published
    but not described, a view whose columns differ from its description (change it as a new
    version instead), a described view gone while a reader still uses it, a view a reader uses
    that is not described. A described view gone that no reader uses is retired: no breach."""
    found = []
    for name, columns in published.items():
        if name not in described:
            found.append(f"{service}_read.{name} is published but not described in "
                         f"{contract_file(service).name}: add "
                         f"{json.dumps({name: dict(columns)})}")
        elif described[name] != columns:
            found.append(f"{service}_read.{name} has columns {columns}, its description "
                         f"{described[name]}: a view's columns never change, publish a new "
                         "version beside it")
    for name in described:
        if name not in published and read_by.get((service, name)):
            found.append(f"{service}_read.{name} is gone while read by "
                         f"{', '.join(read_by[(service, name)])}: keep it until they moved")
    for (svc, name), files in read_by.items():
        if svc == service and name not in described:
            found.append(f"{service}_read.{name}, read by {', '.join(files)}, is not in the "
                         "contract")
    return found


def as_json(views: Views) -> str:
    return json.dumps({"views": {name: dict(columns) for name, columns in views.items()}},
                      indent=2) + "\n"


async def _print_published() -> None:
    conn = await asyncpg.connect(config.admin_dsn())
    try:
        for service in SERVICES:
            print(f"# {contract_file(service)}")
            print(as_json(await published(conn, service)), end="")
    finally:
        await conn.close()


if __name__ == "__main__":
    asyncio.run(_print_published())

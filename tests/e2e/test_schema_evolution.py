"""The standard's schema evolution policy walked end to end on the running stack
(docs/operations.md#evolving-an-event-schema): a breaking change of OrdenSolicitada is the event
type OrdenSolicitada_v4, registered as an artifact of its own; pedidos publishes both in each
order's commit; inventario reads the old one, then both (each saga checked once), then the new
one (a saga whose old version it handled is not handled again); the old version deprecated in
the registry, pedidos and inventario learn it, log warnings and count its use; retiring it is
refused while it is in use, and succeeds once no service used it for the window (shortened by
its setting); the registration of the contracts leaves it retired. Orders complete at every
step. The registry's states and the services' settings are put back at the end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from saga_contracts.schema_artifacts import GROUP
from saga_harness import config, db, stack
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.config import ROOT
from saga_harness.waiting import wait_for
from sagactl.schema_registration import artifact_path
from sagactl.schema_registry import Registry
from sagakit.twins import TWIN_OF

OLD, NEW = "OrdenSolicitada", "OrdenSolicitada_v4"
OLD_ARTIFACT, OLD_VERSION = "OrdenSolicitada_v3", "3.0.0"
# The services learn the registry's states and write their last uses every half second.
FAST = {"SAGA_SCHEMA_DEPRECATIONS_INTERVAL_S": "0.5", "SAGA_SCHEMA_USE_FLUSH_S": "0.5"}
# The retirement window, shortened: 40 seconds without any use instead of 30 days.
WINDOW_S = 40.0
LOGS = Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local")) / "logs"


def _sagactl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sagactl.cli", "schemas", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def _deployer() -> Registry:
    made = json.loads(stack.stack("credentials").stdout)["schema_registry"]
    who = made["principals"]["deployer"]
    return Registry(made["url"], who["username"], who["password"])


def _state(registry: Registry) -> str:
    found = registry.get(artifact_path(GROUP, OLD_ARTIFACT, "versions"))
    [version] = [v for v in found["versions"] if v["version"] == OLD_VERSION]
    state: str = version["state"]
    return state


@pytest.fixture
def walk(running_stack: None) -> Iterator[Registry]:
    """The registry as the deployer; afterwards the old version enabled again and pedidos and
    inventario restarted with their own settings."""
    registry = _deployer()
    try:
        yield registry
    finally:
        registry.put(artifact_path(GROUP, OLD_ARTIFACT, "versions", OLD_VERSION, "state"),
                     {"state": "ENABLED"})
        stack.restart("pedidos")
        stack.restart("inventario")


async def _completed_order(saga: Saga) -> str:
    """An order placed and completed; its saga id."""
    sku = new_sku()
    await saga.set_stock(sku, 1)
    placed = await saga.place(order_body([(sku, 1)]))
    await saga.wait_status(placed["order_id"], "COMPLETADA", timeout=30)
    saga_id: str = placed["saga_id"]
    return saga_id


async def _published(saga_id: str) -> list[dict[str, Any]]:
    """pedidos' OrdenSolicitada envelopes of the saga, in outbox order."""
    rows = await db.fetch("SELECT payload FROM pedidos.outbox WHERE saga_id = $1 AND "
                          "event_type = ANY($2::text[]) ORDER BY id", saga_id, [OLD, NEW])
    return [json.loads(r["payload"]) if isinstance(r["payload"], str) else r["payload"]
            for r in rows]


async def _claimed(saga_id: str) -> list[tuple[str, str]]:
    """inventario's inbox rows of the saga's order: (message id, event type handled)."""
    rows = await db.fetch("SELECT message_id, event_type FROM inventario.processed_messages "
                          "WHERE saga_id = $1 AND event_type = ANY($2::text[])",
                          saga_id, [OLD, NEW])
    return [(r["message_id"], r["event_type"]) for r in rows]


async def _answers(saga_id: str) -> int:
    return int(await db.fetchval(
        "SELECT count(*) FROM inventario.outbox WHERE saga_id = $1 AND event_type = "
        "'StockVerificado'", saga_id))


def _sample(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line
                                               for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


async def _metric(saga: Saga, base: str, name: str, **labels: str) -> float | None:
    return _sample((await saga.http.get(f"{base}/metrics")).text, name, **labels)


def _warnings(service: str, use: str) -> list[str]:
    wanted = f"{use} a deprecated schema version: {OLD} {OLD_VERSION}"
    lines = (LOGS / f"{service}.log").read_text(errors="replace").splitlines()
    return [line for line in lines if wanted in line]


async def _last_use(service: str, use: str) -> Any:
    return await db.fetchval(
        f"SELECT last_seen_at FROM {service}_read.schema_version_use_v1 WHERE event_type = $1 "
        "AND schema_version = $2 AND use = $3", OLD, OLD_VERSION, use)


# About seven minutes on a loaded machine: six restarts of a service, and the window.
@pytest.mark.timeout(1200)
async def test_a_breaking_change_walks_from_dual_publication_to_retirement(
        saga: Saga, walk: Registry) -> None:
    registry = walk
    assert registry.get(artifact_path(GROUP, NEW, "versions", "4.0.0", "content"))["title"] == NEW

    # 1. pedidos publishes both versions; inventario, as it runs, reads the old one only.
    stack.restart("pedidos", {**FAST, "PEDIDOS_PUBLISHES_ORDEN_SOLICITADA": f"{OLD},{NEW}"})
    saga_id = await _completed_order(saga)
    old, new = await _published(saga_id)
    assert (old["event_type"], new["event_type"]) == (OLD, NEW)
    assert new["metadata"][TWIN_OF] == old["message_id"]
    assert await _claimed(saga_id) == [(old["message_id"], OLD)]

    # 2. inventario reads both: each saga is checked once, on the first that comes.
    stack.restart("inventario", {**FAST, "INVENTARIO_READS_ORDEN_SOLICITADA": f"{OLD},{NEW}"})
    saga_id = await _completed_order(saga)
    old, _ = await _published(saga_id)
    await saga.wait_caught_up("inventario")
    assert await _claimed(saga_id) == [(old["message_id"], OLD)]
    assert await _answers(saga_id) == 1

    # 3. The old version deprecated: pedidos and inventario learn it from the registry, count
    # its use and warn that they produced and consumed it.
    done = _sagactl("deprecate", OLD_ARTIFACT)
    assert done.returncode == 0, done.stderr
    assert _state(registry) == "DEPRECATED"
    for base, service in ((config.PEDIDOS, "pedidos"), (config.INVENTARIO, "inventario")):
        await wait_for(lambda b=base, s=service: _metric(  # type: ignore[misc]
            saga, b, "saga_schema_version_deprecated", event=OLD, version=OLD_VERSION,
            service=s), lambda v: v == 1, timeout=15, what=f"{service} learns the deprecation")
    saga_id = await _completed_order(saga)
    assert (await _metric(saga, config.PEDIDOS, "saga_schema_version_in_use_total", event=OLD,
                          version=OLD_VERSION, service="pedidos") or 0) >= 1
    assert (await _metric(saga, config.INVENTARIO, "saga_schema_version_in_use_total",
                          event=OLD, version=OLD_VERSION, service="inventario") or 0) >= 1
    await wait_for(lambda: _as_list(_warnings("pedidos", "produced")), bool, timeout=15,
                   what="pedidos warns it produced a deprecated version")
    await wait_for(lambda: _as_list(_warnings("inventario", "consumed")), bool, timeout=15,
                   what="inventario warns it consumed a deprecated version")

    # 4. Retiring it is refused while it is in use (once the uses are written down).
    await wait_for(lambda: _last_use("inventario", "consumed"), lambda at: at is not None,
                   timeout=15, what="inventario's last use of the old version written down")
    window = {"SAGACTL_SCHEMA_RETIRE_UNUSED_DAYS": str(WINDOW_S / 86_400)}
    refused = _sagactl("retire", OLD_ARTIFACT, env=window)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "still in use" in refused.stderr and "inventario consumed" in refused.stderr
    assert "pedidos produced" in refused.stderr
    assert _state(registry) == "DEPRECATED"

    # 5. inventario moves to the new version: a saga is claimed under the old version's id and
    # handled on the new one.
    stack.restart("inventario", {**FAST, "INVENTARIO_READS_ORDEN_SOLICITADA": NEW})
    last_old_published = time.monotonic()
    saga_id = await _completed_order(saga)
    old, _ = await _published(saga_id)
    assert await _claimed(saga_id) == [(old["message_id"], NEW)]

    # 6. pedidos stops publishing the old version; it is retired once no service used it for
    # the window, and not before.
    stack.restart("pedidos", {**FAST, "PEDIDOS_PUBLISHES_ORDEN_SOLICITADA": NEW})
    saga_id = await _completed_order(saga)
    assert [e["event_type"] for e in await _published(saga_id)] == [NEW]
    retired = await wait_for(lambda: _retire(window), lambda r: r.returncode == 0,
                             timeout=WINDOW_S + 60, interval=2,
                             what="retirement once the old version is unused")
    assert time.monotonic() - last_old_published >= WINDOW_S - 1, "retired within the window"
    assert re.search(rf"{OLD_ARTIFACT} {OLD_VERSION}: retired", retired.stdout), retired.stdout
    assert _state(registry) == "DISABLED"

    # The contracts' registration (every deployment's step) leaves it retired; orders go on.
    registered = _sagactl("register")
    assert registered.returncode == 0, registered.stderr
    assert f"{OLD_ARTIFACT} {OLD_VERSION}: retired" in registered.stdout
    await _completed_order(saga)


async def _as_list(lines: list[str]) -> list[str]:
    return lines


async def _retire(window: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return _sagactl("retire", OLD_ARTIFACT, env=window)

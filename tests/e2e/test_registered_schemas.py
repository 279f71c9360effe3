"""The services against the schema registry they run with (sagakit.schema_registry;
docs/operations.md, "Schemas at run time"): a service refuses to start when a version it
produces is not registered; inventario validates an event of a version only the registry holds
with the registry's schema, fetched once, and dead-letters one the registry lacks as
``unknown_schema`` and goes on; with the registry stopped, or hung, down or answering garbage
behind the TCP proxy, sagas complete: every version in use is cached; and a registry that stops
answering is seen in ``saga_schema_registry_reachable``."""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from saga_contracts.registry import SCHEMA_DIR, all_schemas
from saga_contracts.topology import CONSUMES
from saga_harness import config, db, stack
from saga_harness.clients import Saga
from saga_harness.faults import behind_proxy, reconfigured
from saga_harness.kafka import TopicReader, envelope, produce
from saga_harness.waiting import wait_for
from sagakit.schema_registry import produced_by

LATEST_CANCELLATION = all_schemas()["OrdenCancelada"][-1]


def _registered_into(group: str, tree: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "sagactl.cli", "schemas", "register",
                           "--schemas", str(tree), "--group", group], cwd=config.ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def _with_a_note(version: str) -> dict[str, Any]:
    """A version of OrdenCancelada only the registry holds: ``note`` required, which the
    package's schemas do not ask (a consumer of the version before still reads it)."""
    document = copy.deepcopy(LATEST_CANCELLATION.document)
    document["$id"] = f"urn:saga:event:OrdenCancelada:{version}"
    document["x-schema-version"] = version
    document["properties"]["note"] = {"type": "string", "description": "A note."}
    document["required"] = [*document["required"], "note"]
    return document


@pytest.fixture(scope="module")
def scratch_group(running_stack: None, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[str]:
    """inventario reading a group of its own: the contracts' schemas, and OrdenCancelada
    1.2.0, which only the registry knows, registered once inventario runs (the contracts' group
    stays as the contracts make it)."""
    group = f"test-{uuid.uuid4().hex[:12]}"
    tree = tmp_path_factory.mktemp("schemas")
    # What inventario reads at its start: the event types it handles and those it produces.
    for event_type in {*CONSUMES["inventario"], *(s.event_type for s in produced_by("inventario"))}:
        shutil.copytree(SCHEMA_DIR / event_type, tree / event_type)
    _registered_into(group, tree)
    with reconfigured("inventario", {"SCHEMA_REGISTRY_GROUP": group}):
        later = tmp_path_factory.mktemp("later") / "OrdenCancelada"
        shutil.copytree(SCHEMA_DIR / "OrdenCancelada", later)
        (later / "1.2.0.json").write_text(json.dumps(_with_a_note("1.2.0")))
        _registered_into(group, later.parent)
        yield group


def _cancellation(version: str, **extra: Any) -> dict[str, Any]:
    return envelope("OrdenCancelada", {"order_id": str(uuid.uuid4()),
                                       "status": "CANCELADA_POR_USUARIO",
                                       "reason": "cancelada_por_usuario", **extra},
                    source="pedidos", schema_version=version)


async def _handled(event: dict[str, Any], timeout: float = 15) -> None:
    await wait_for(lambda: db.fetchval(
        "SELECT count(*) FROM inventario.processed_messages WHERE message_id = $1",
        event["message_id"]), lambda n: n == 1, timeout=timeout,
        what=f"inventario handled {event['schema_version']}")


async def _sample(saga: Saga, name: str, labels: dict[str, str]) -> float | None:
    """The value of one sample at inventario's /metrics, None if it has none."""
    text = (await saga.http.get(f"{config.INVENTARIO}/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return None


async def _fetches(saga: Saga, when: str, outcome: str) -> float:
    value = await _sample(saga, "saga_schema_registry_fetches_total",
                          {"service": "inventario", "when": when, "outcome": outcome})
    if value is None:
        raise AssertionError(f"no saga_schema_registry_fetches_total{{when={when}, "
                             f"outcome={outcome}}} at inventario's /metrics")
    return value


def test_a_service_refuses_to_start_when_a_version_it_produces_is_not_registered(
        running_stack: None) -> None:
    empty = f"test-empty-{uuid.uuid4().hex[:12]}"
    reader_password = config.stack_secret("registry-reader")
    try:
        with pytest.raises(RuntimeError) as refused:
            stack.restart("inventario", {"SCHEMA_REGISTRY_GROUP": empty,
                                         "SCHEMA_REGISTRY_START_TIMEOUT_S": "3"})
        said = str(refused.value)
        assert "refusing to start" in said, said
        latest = all_schemas()["StockVerificado"][-1].version
        assert f"StockVerificado {latest}" in said and "is not registered" in said, said
        assert reader_password not in said
        assert not stack.alive("inventario")
    finally:
        stack.restart("inventario")


async def test_a_version_only_the_registry_holds_is_validated_with_its_schema(
        scratch_group: str, saga: Saga) -> None:
    found_before = await _fetches(saga, "miss", "found")
    with_note = _cancellation("1.2.0", note="registered only")
    async with TopicReader("inventario-dlq") as dlq:
        without = _cancellation("1.2.0")
        await produce("order-events", without)
        letter = await dlq.wait_for(lambda r: (r.key or b"").decode() == without["saga_id"])
        await produce("order-events", with_note)
        await _handled(with_note)
    body = json.loads(letter.value)
    # The package's schemas admit it: the registry's, the one used, requires the note.
    assert body["reason"] == "schema_invalid" and "note" in body["attempts"][0]["error"]
    assert await _fetches(saga, "miss", "found") == found_before + 1


async def test_a_version_the_registry_lacks_is_dead_lettered_and_the_consumer_goes_on(
        scratch_group: str, saga: Saga) -> None:
    missing_before = await _fetches(saga, "miss", "missing")
    unknown = _cancellation("1.9.0")
    async with TopicReader("inventario-dlq") as dlq:
        await produce("order-events", unknown)
        letter = await dlq.wait_for(lambda r: (r.key or b"").decode() == unknown["saga_id"])
    body = json.loads(letter.value)
    assert body["reason"] == "unknown_schema"
    assert letter.headers and dict((k, v.decode()) for k, v in letter.headers)[
        "X-DLQ-Error-Class"] == "unknown_schema"
    assert body["attempt_count"] == len(body["attempts"]) == 1
    assert "OrdenCancelada 1.9.0" in body["attempts"][0]["error"]
    assert json.loads(body["original"]["value"]["data"]) == unknown
    assert await _fetches(saga, "miss", "missing") == missing_before + 1
    # Goes on: the next record is handled, and a whole saga completes.
    after = _cancellation(LATEST_CANCELLATION.version)
    await produce("order-events", after)
    await _handled(after)
    await saga.settled_order(5, "COMPLETADA")


@pytest.fixture
def registry_stopped(running_stack: None) -> Iterator[None]:
    stack.stop("registry")
    try:
        yield
    finally:
        stack.start("registry")


async def test_with_the_registry_stopped_sagas_complete(registry_stopped: None,
                                                        saga: Saga) -> None:
    for _ in range(3):
        await saga.settled_order(5, "COMPLETADA")


async def _registry_reachable(saga: Saga) -> float | None:
    return await _sample(saga, "saga_schema_registry_reachable", {"service": "inventario"})


async def test_a_registry_that_stops_answering_is_seen_and_seen_back(running_stack: None,
                                                                    saga: Saga) -> None:
    """What the alert SchemaRegistryUnreachable watches: inventario, asking every half second
    which versions are deprecated, says the registry stopped answering, and then that it
    answers again."""
    with reconfigured("inventario", {"SAGA_SCHEMA_DEPRECATIONS_INTERVAL_S": "0.5"}):
        await wait_for(lambda: _registry_reachable(saga), lambda v: v == 1, timeout=20,
                       what="inventario's first answer from the registry")
        stack.stop("registry")
        try:
            await wait_for(lambda: _registry_reachable(saga), lambda v: v == 0, timeout=30,
                           what="inventario says the stopped registry is unreachable")
        finally:
            stack.start("registry")
        await wait_for(lambda: _registry_reachable(saga), lambda v: v == 1, timeout=30,
                       what="inventario says the registry answers again")


@pytest.fixture(scope="module")
async def inventario_behind_proxy(running_stack: None) -> AsyncIterator[str]:
    async with behind_proxy(["inventario"]) as control:
        yield control


async def _fault(control: str, **fault: Any) -> None:
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.put(f"{control}/routes/inventario-registry", json=fault)
        response.raise_for_status()


@pytest.mark.parametrize("fault", [{"blackhole": True}, {"garbage_share": 1.0},
                                   {"refuse": True}], ids=["hung", "garbage", "down"])
async def test_with_the_registry_faulted_the_consumer_goes_on_and_sagas_complete(
        inventario_behind_proxy: str, saga: Saga, fault: dict[str, Any]) -> None:
    await _fault(inventario_behind_proxy, **fault)
    unavailable_before = await _fetches(saga, "miss", "unavailable")
    # Versions it has not cached, until one of them has made it ask the registry (between
    # two asks it waits a backoff): each is read meanwhile with the package's schema of its
    # MAJOR, within the request's timeout (2 s), not stalled behind the registry.
    minor = 20

    async def asked() -> float:
        nonlocal minor
        minor += 1
        event = _cancellation(f"1.{minor}.0")
        started = asyncio.get_running_loop().time()
        await produce("order-events", event)
        await _handled(event, timeout=10)
        assert asyncio.get_running_loop().time() - started < 8
        return await _fetches(saga, "miss", "unavailable")

    await wait_for(asked, lambda n: n > unavailable_before, timeout=60,
                   what="inventario asked the faulted registry")
    await saga.settled_order(5, "COMPLETADA")

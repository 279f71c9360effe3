"""A service's start with a schema registry: it refuses to start unless every version it
produces is registered as its code writes it, naming what is missing; it waits for a registry
that does not answer yet, and for versions being registered beside it, within its start
timeout; with no registry set it uses the contracts' package's schemas, and says so."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from saga_contracts.registry import all_schemas
from saga_contracts.schema_artifacts import artifact_id
from sagakit.schema_registry import (
    RefusedToStart,
    SchemaRegistrySettings,
    open_schemas,
    produced_by,
)

from .schema_registry_fakes import FakeRegistry

SETTINGS = SchemaRegistrySettings(url="http://registry.invalid/apis/registry/v3",
                                  username="reader", password="s3cret-pw", start_timeout_s=0.5)


def test_a_service_produces_the_latest_version_of_the_types_it_is_the_producer_of() -> None:
    produced = {(s.event_type, s.version) for s in produced_by("inventario")}
    assert ("StockVerificado", all_schemas()["StockVerificado"][-1].version) in produced
    assert all(s.producer == "inventario" for s in produced_by("inventario"))
    assert not {s.event_type for s in produced_by("inventario")} & {
        s.event_type for s in produced_by("pagos")}


async def test_a_produced_version_missing_from_the_registry_refuses_the_start() -> None:
    fake = FakeRegistry()
    latest = all_schemas()["StockVerificado"][-1]
    del fake.artifacts[artifact_id("StockVerificado", latest.version)][latest.version]
    with pytest.raises(RefusedToStart) as refused:
        await open_schemas("inventario", ["OrdenSolicitada"], SETTINGS, lambda _: fake)
    message = str(refused.value)
    assert f"StockVerificado {latest.version}" in message and "is not registered" in message
    assert "s3cret-pw" not in message
    assert fake.closed


async def test_a_produced_version_registered_with_other_content_refuses_the_start() -> None:
    fake = FakeRegistry()
    latest = all_schemas()["PagoExitoso"][-1]
    fake.artifacts[artifact_id("PagoExitoso", latest.version)][latest.version]["title"] = "x"
    with pytest.raises(RefusedToStart, match=f"PagoExitoso {latest.version}.*another schema"):
        await open_schemas("pagos", [], SETTINGS, lambda _: fake)


async def test_the_start_waits_for_a_registry_coming_up_and_versions_being_registered(
        caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeRegistry({})
    fake.down = True

    async def registered_meanwhile() -> None:
        await asyncio.sleep(0.2)
        fake.down = False
        await asyncio.sleep(0.2)
        fake.artifacts.update(FakeRegistry().artifacts)

    settings = SETTINGS.model_copy(update={"start_timeout_s": 10.0})
    helper = asyncio.create_task(registered_meanwhile())
    caplog.set_level(logging.INFO, "sagakit.schema_registry")
    schemas = await open_schemas("pedidos", ["StockVerificado"], settings, lambda _: fake)
    await helper
    assert schemas.cached("StockVerificado", all_schemas()["StockVerificado"][0].version)
    assert "s3cret-pw" not in caplog.text


async def test_with_no_registry_the_package_s_schemas_are_used_and_the_start_says_so(
        caplog: pytest.LogCaptureFixture) -> None:
    asked: list[Any] = []
    schemas = await open_schemas("pedidos", ["StockVerificado"], SchemaRegistrySettings(),
                                 lambda s: asked.append(s))  # type: ignore[arg-type,func-returns-value]
    assert schemas.client is None and asked == []
    assert "SCHEMA_REGISTRY_URL is not set" in caplog.text

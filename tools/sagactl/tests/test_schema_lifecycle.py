"""``sagactl schemas deprecate|retire`` against the in-memory registry of
test_schema_registration: deprecate marks every version (or one) deprecated; retire refuses a
version not deprecated first, and one a service used within the window, naming who and when,
and retires nothing then; once unused it retires it, and a registration after it leaves the
retired version as it is (its content is no one's to read) and the catalog without it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from saga_contracts.registry import all_schemas
from saga_contracts.schema_artifacts import GROUP
from sagactl import schema_lifecycle as lifecycle
from sagactl.schema_registration import register, registered_schemas

from .test_schema_registration import FakeRegistry

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)


class FakeViews:
    """The services' ``schema_version_use_v1`` as sagactl's reader reads them."""

    def __init__(self, rows: dict[str, list[tuple[str, str, str, datetime]]]) -> None:
        self.rows = rows

    async def fetch(self, sql: str, event_type: str, versions: list[str]) -> list[dict[str, Any]]:
        service = sql.split(" FROM ")[1].split("_read.")[0]
        return [{"event_type": e, "schema_version": v, "use": u, "last_seen_at": at}
                for e, v, u, at in self.rows.get(service, [])
                if e == event_type and v in versions]

    async def fetchval(self, sql: str) -> datetime:
        return NOW


def _registry() -> FakeRegistry:
    fake = FakeRegistry()
    register(fake, all_schemas())
    return fake


def _states(fake: FakeRegistry, artifact: str) -> dict[str, str]:
    art = fake.artifacts[(GROUP, artifact)]
    return {v: art.get("states", {}).get(v, "ENABLED") for v in art["versions"]}


def test_deprecate_marks_every_version_of_the_artifact_or_the_one_named() -> None:
    fake = _registry()
    lifecycle.deprecate(fake, GROUP, "StockVerificado_v4", "4.0.0")
    assert _states(fake, "StockVerificado_v4") == {"4.0.0": "DEPRECATED", "4.1.0": "ENABLED"}
    lifecycle.deprecate(fake, GROUP, "StockVerificado_v4")
    assert set(_states(fake, "StockVerificado_v4").values()) == {"DEPRECATED"}


async def test_retire_refuses_a_version_not_deprecated_first() -> None:
    fake = _registry()
    with pytest.raises(lifecycle.NotRetired, match="deprecate first"):
        await lifecycle.retire(fake, FakeViews({}), GROUP, "OrdenSolicitada_v3", None, 30)  # type: ignore[arg-type]
    assert _states(fake, "OrdenSolicitada_v3") == {"3.0.0": "ENABLED"}


async def test_retire_refuses_a_version_used_within_the_window_and_says_by_whom() -> None:
    fake = _registry()
    lifecycle.deprecate(fake, GROUP, "OrdenSolicitada_v3")
    views = FakeViews({
        "pedidos": [("OrdenSolicitada", "3.0.0", "produced", NOW - timedelta(days=40))],
        "inventario": [("OrdenSolicitada", "3.0.0", "consumed", NOW - timedelta(days=29))],
        "pagos": [("OrdenSolicitada_v4", "4.0.0", "consumed", NOW)]})
    with pytest.raises(lifecycle.NotRetired) as refused:
        await lifecycle.retire(fake, views, GROUP, "OrdenSolicitada_v3", None, 30)  # type: ignore[arg-type]
    assert "inventario consumed OrdenSolicitada 3.0.0 at 2026-11-07T12:00:00+00:00" in str(
        refused.value)
    assert "pedidos" not in str(refused.value)
    assert _states(fake, "OrdenSolicitada_v3") == {"3.0.0": "DEPRECATED"}


async def test_an_unused_deprecated_version_is_retired_and_registration_leaves_it_so() -> None:
    fake = _registry()
    lifecycle.deprecate(fake, GROUP, "OrdenSolicitada_v3")
    views = FakeViews({"inventario": [("OrdenSolicitada", "3.0.0", "consumed",
                                       NOW - timedelta(days=31))]})
    versions, uses = await lifecycle.retire(fake, views, GROUP, "OrdenSolicitada_v3", None, 30)  # type: ignore[arg-type]
    assert [(v.version, v.state) for v in versions] == [("3.0.0", "DEPRECATED")]
    assert [u.service for u in uses] == ["inventario"]
    assert _states(fake, "OrdenSolicitada_v3") == {"3.0.0": "DISABLED"}

    steps = register(fake, all_schemas())
    assert [s.outcome for s in steps if s.artifact == "OrdenSolicitada_v3"] == ["retired"]
    in_catalog = registered_schemas(fake)["OrdenSolicitada"]
    assert [s.version for s in in_catalog] == ["1.0.0", "2.0.0"]


def test_the_window_is_a_number_of_days() -> None:
    version = lifecycle.Version("A", "1.0.0", "DEPRECATED")
    use = lifecycle.LastUse("pagos", "A", "1.0.0", "consumed", NOW - timedelta(minutes=2))
    with pytest.raises(lifecycle.NotRetired):
        lifecycle.check_retirable([version], [use], NOW, unused_days=1 / 24 / 60 * 3)
    lifecycle.check_retirable([version], [use], NOW, unused_days=1 / 24 / 60)

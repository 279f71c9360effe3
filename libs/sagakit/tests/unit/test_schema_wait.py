"""The wait for the schema's migration head (sagakit.store.schema_wait), with a fake version
table: it returns once the head is there, says what it waits for while it is not, gives up at
its deadline, and does not hold back an older image on a newer schema."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sagakit.store.schema_wait import ReadRevision, expected_head, known_revisions, wait_for_head

ROOT = Path(__file__).resolve().parents[4]
KNOWN = {"0001", "0002", "0003"}


def reader(*revisions: str | None) -> ReadRevision:
    seen = list(revisions)

    async def read() -> str | None:
        return seen.pop(0) if len(seen) > 1 else seen[0]
    return read


async def test_it_returns_once_the_schema_reaches_the_head(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "sagakit.schema_wait")
    done = await wait_for_head(reader(None, "0002", "0003"), "0003", KNOWN, schema="pedidos",
                               timeout_s=5, poll_s=0.01)
    assert done
    waiting = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
    assert waiting == [
        "waiting for schema pedidos to reach migration head 0003: not migrated yet",
        "waiting for schema pedidos to reach migration head 0003: at 0002"]


async def test_it_gives_up_at_its_deadline_and_says_what_it_waited_for(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "sagakit.schema_wait")
    done = await wait_for_head(reader("0002"), "0003", KNOWN, schema="pedidos",
                               timeout_s=0.05, poll_s=0.01)
    assert not done
    assert "still at 0002" in caplog.records[-1].getMessage()
    assert "migration head 0003" in caplog.records[-1].getMessage()


async def test_an_older_image_starts_on_a_newer_schema() -> None:
    assert await wait_for_head(reader("0004"), "0003", KNOWN, schema="pedidos", timeout_s=0)


async def test_an_unreachable_database_is_waited_for() -> None:
    calls = 0

    async def read() -> str | None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionRefusedError
        return "0003"
    assert await wait_for_head(read, "0003", KNOWN, schema="pedidos", timeout_s=5, poll_s=0.01)


@pytest.mark.parametrize("service", ["pedidos", "inventario", "pagos"])
def test_the_head_is_read_from_the_services_migrations(service: str) -> None:
    ini = ROOT / "services" / service / "alembic.ini"
    assert expected_head(ini) in known_revisions(ini)

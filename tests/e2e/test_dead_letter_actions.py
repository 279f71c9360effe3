"""The operator's actions on a service's dead letters, through its API (every service serves
``/operator/dead-letters``): who (the token's ``sub``), when and why, in an append-only table
the service's app role can add to but never change; archived letters deleted past their
retention, their audit kept; the published view for the reader role only."""

from __future__ import annotations

import uuid

import asyncpg
import httpx
import pytest

from saga_harness import config, db
from saga_harness.dead_letters import dead_letter
from saga_harness.identity import bearer, customer_token, token
from sagakit.operations.dead_letter_actions import delete_archived
from sagakit.store.postgres_url import create_engine_for

pytestmark = pytest.mark.usefixtures("running_stack")

SERVICES = {"pedidos": config.PEDIDOS, "inventario": config.INVENTARIO, "pagos": config.PAGOS}



def _client(sub: str = "ops-alice") -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=15, headers=bearer(token(sub, ("operator",))))


@pytest.mark.parametrize("service", list(SERVICES))
async def test_archive_records_who_when_and_why_in_the_view(service: str) -> None:
    letter_id = await dead_letter(service)
    async with _client() as http:
        got = await http.get(f"{SERVICES[service]}/operator/dead-letters/{letter_id}")
        assert got.status_code == 200 and got.json()["state"] == "open", got.text
        done = await http.post(f"{SERVICES[service]}/operator/dead-letters/{letter_id}/archive",
                               json={"reason": "duplicate of an order placed again"})
    assert done.status_code == 200, done.text
    assert done.json() == {"dead_letter_id": letter_id, "action": "archived",
                           "state": "archived", "operator": "ops-alice"}
    [row] = await db.fetch(f"SELECT state, error_class, last_action_by, last_action_reason, "
                           f"last_action_at, original_partition, original_offset "
                           f"FROM {service}_read.dead_letters_v1 WHERE id = $1::uuid", letter_id)
    assert (row["state"], row["error_class"], row["last_action_by"]) == (
        "archived", "TimeoutError", "ops-alice")
    assert row["last_action_reason"] == "duplicate of an order placed again"
    assert (row["original_partition"], row["original_offset"]) == (1, 2)


async def test_refusals_are_clear_4xx() -> None:
    letter_id = await dead_letter("pedidos")
    base = f"{config.PEDIDOS}/operator/dead-letters"
    async with _client() as http:
        missing = await http.post(f"{base}/{letter_id}/archive", json={})
        assert missing.status_code == 422 and "reason" in missing.text
        unknown = await http.post(f"{base}/{uuid.uuid4()}/archive", json={"reason": "x"})
        assert unknown.status_code == 404
        bad_id = await http.post(f"{base}/not-a-uuid/archive", json={"reason": "x"})
        assert bad_id.status_code == 422
        forged = await http.post(f"{base}/{letter_id}/forgeries",
                                 json={"reason": "its value differs"})
        assert forged.status_code == 200 and forged.json()["state"] == "forged"
        # Forged is for good: never replayed, never archived.
        for path, body in (("replays", {"message_id": str(uuid.uuid4()),
                                        "topic": "payment-events"}),
                           ("archive", {"reason": "tidy up"})):
            refused = await http.post(f"{base}/{letter_id}/{path}", json=body)
            assert refused.status_code == 409 and "forged" in refused.text
    async with httpx.AsyncClient(timeout=15,
                                 headers=bearer(customer_token("c-1"))) as customer:
        assert (await customer.post(f"{base}/{letter_id}/archive",
                                    json={"reason": "x"})).status_code == 403
        assert (await customer.get(f"{base}/{letter_id}")).status_code == 403
    assert await db.fetchval("SELECT state FROM pedidos_read.dead_letters_v1 "
                             "WHERE id = $1::uuid", letter_id) == "forged"


async def test_the_app_role_can_add_actions_but_never_change_or_delete_one() -> None:
    letter_id = await dead_letter("inventario")
    async with _client() as http:
        await http.post(f"{config.INVENTARIO}/operator/dead-letters/{letter_id}/archive",
                        json={"reason": "kept for the audit"})
    conn = await asyncpg.connect(config.role_dsn("inventario", "app"))
    try:
        for statement in ("UPDATE inventario.dead_letter_actions SET operator = 'someone'",
                          "DELETE FROM inventario.dead_letter_actions"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
    finally:
        await conn.close()


async def test_archived_letters_past_retention_are_deleted_their_audit_kept() -> None:
    old_archived, old_open, recent_archived = [await dead_letter("pagos") for _ in range(3)]
    async with _client() as http:
        for letter_id in (old_archived, recent_archived):
            r = await http.post(f"{config.PAGOS}/operator/dead-letters/{letter_id}/archive",
                                json={"reason": "retention test"})
            assert r.status_code == 200
    # Archived (and written) long ago: as the admin, the app role cannot backdate an action.
    await db.execute("UPDATE pagos.dead_letter_actions SET at = now() - interval '40 days' "
                     "WHERE dead_letter_id = $1::uuid", old_archived)
    await db.execute("UPDATE pagos.outbox SET created_at = now() - interval '40 days' "
                     "WHERE message_id = ANY($1::uuid[])", [old_archived, old_open])
    # As the service runs it (its cleanup job), with its app role.
    engine = create_engine_for(config.role_dsn("pagos", "app").replace(
        "postgresql://", "postgresql+asyncpg://"))
    try:
        assert await delete_archived(engine, "pagos", retention_days=30) >= 1
    finally:
        await engine.dispose()
    left = {r["id"] for r in await db.fetch(
        "SELECT id::text AS id FROM pagos_read.dead_letters_v1 WHERE id = ANY($1::uuid[])",
        [old_archived, old_open, recent_archived])}
    assert left == {old_open, recent_archived}
    assert await db.fetchval("SELECT count(*) FROM pagos.dead_letter_actions "
                             "WHERE dead_letter_id = $1::uuid", old_archived) == 1

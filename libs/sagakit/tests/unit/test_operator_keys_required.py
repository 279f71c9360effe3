"""A service that runs its consumer does not start without the operator's replay-signing
public keys: without them no replay is believed, and every consumer of a topic would handle a
replay addressed to another service as any record."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import MetaData

from saga_contracts.events.payments import PagoExitoso
from sagakit.consumer import Subscription
from sagakit.message import Message
from sagakit.runtime import ServiceDefinition, create_app
from sagakit.store.tables import messaging_tables


async def _allocate(uow: Any, event: Message[PagoExitoso]) -> None:
    return None


def _app() -> Any:
    return create_app(ServiceDefinition(
        name="keystest", tables=messaging_tables(MetaData(schema="keystest")),
        subscriptions=lambda rt: [Subscription(PagoExitoso, _allocate)], routers=[]))


@pytest.fixture(autouse=True)
def _database(monkeypatch: pytest.MonkeyPatch) -> None:
    # Never reached: the service stops before it connects to anything.
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://nobody@127.0.0.1:1/none")


@pytest.mark.parametrize("keys", [None, "", "  "])
async def test_no_consumer_starts_without_the_operators_keys(
        monkeypatch: pytest.MonkeyPatch, keys: str | None) -> None:
    if keys is None:
        monkeypatch.delenv("SAGA_OPERATOR_PUBLIC_KEYS", raising=False)
    else:
        monkeypatch.setenv("SAGA_OPERATOR_PUBLIC_KEYS", keys)
    app = _app()
    with pytest.raises(SystemExit, match="SAGA_OPERATOR_PUBLIC_KEYS is empty"):
        async with app.router.lifespan_context(app):
            pass

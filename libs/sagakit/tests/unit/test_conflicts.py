"""A unit of work that lost a race (deadlock, serialization failure) is run again; one that
keeps losing is answered 503 with Retry-After, never 500; any other error is not retried."""

from __future__ import annotations

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from sagakit.runtime.http_errors import install_database_error_handlers
from sagakit.store.conflicts import StillConflicting, retry_on_conflict


class _Racing:
    def __init__(self, losses: int, error: Exception | None = None) -> None:
        self.losses = losses
        self.runs = 0
        self.error = error or asyncpg.exceptions.DeadlockDetectedError("deadlock detected")

    async def __call__(self) -> str:
        self.runs += 1
        if self.runs <= self.losses:
            raise self.error
        return "done"


async def test_a_lost_race_is_run_again_until_it_wins() -> None:
    work = _Racing(losses=2)
    assert await retry_on_conflict(work, what="test") == "done"
    assert work.runs == 3


async def test_a_serialization_failure_is_a_lost_race_too() -> None:
    work = _Racing(losses=1, error=asyncpg.exceptions.SerializationError("could not serialize"))
    assert await retry_on_conflict(work, what="test") == "done"


async def test_a_race_lost_every_time_gives_up_with_still_conflicting() -> None:
    work = _Racing(losses=10)
    with pytest.raises(StillConflicting):
        await retry_on_conflict(work, what="test", attempts=3)
    assert work.runs == 3


async def test_other_errors_are_not_retried() -> None:
    work = _Racing(losses=1, error=ValueError("bad"))
    with pytest.raises(ValueError):
        await retry_on_conflict(work, what="test")
    assert work.runs == 1


async def test_a_request_that_kept_losing_is_answered_503_not_500() -> None:
    app = FastAPI()
    install_database_error_handlers(app)

    @app.post("/cancel")
    async def cancel() -> str:
        return await retry_on_conflict(_Racing(losses=10), what="cancel", attempts=2)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://test") as client:
        response = await client.post("/cancel")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"

"""The quiet uvicorn main loop: one tick a second that still refreshes the Date header, and a
shutdown signal that ends the loop at once instead of at the next tick."""

from __future__ import annotations

import asyncio
import signal

import pytest
import uvicorn

from sagakit.runtime import http_server


async def _app(scope: object, receive: object, send: object) -> None:  # pragma: no cover
    raise AssertionError("no request is made")


def _server(ticks: list[int], stop_after: int | None = None,
            ticked: asyncio.Event | None = None) -> http_server.QuietServer:
    server = http_server.QuietServer(uvicorn.Config(_app))

    async def on_tick(counter: int) -> bool:
        ticks.append(counter)
        if ticked is not None:
            ticked.set()
        return server.should_exit or (stop_after is not None and len(ticks) >= stop_after)

    server.on_tick = on_tick  # type: ignore[method-assign]
    return server


async def test_every_tick_is_one_that_refreshes_the_date_header(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_server, "TICK_S", 0.01)
    ticks: list[int] = []
    await asyncio.wait_for(_server(ticks, stop_after=4).main_loop(), 10)
    # uvicorn refreshes the Date header on ticks divisible by 10 (tenths of a second).
    assert ticks == [0, 10, 20, 30]


async def test_a_shutdown_signal_ends_the_loop_without_waiting_for_the_next_tick(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_server, "TICK_S", 3600.0)
    ticks: list[int] = []
    ticked = asyncio.Event()
    server = _server(ticks, ticked=ticked)
    loop_task = asyncio.create_task(server.main_loop())
    await asyncio.wait_for(ticked.wait(), 10)
    server.handle_exit(signal.SIGTERM, None)
    await asyncio.wait_for(loop_task, 10)  # an hour without the wake-up
    assert server.should_exit
    assert ticks == [0, 10]

"""Periodic jobs run again after their interval, or sooner when they say their next work falls
due sooner (``RunAgainIn``): a scanner of deadlines sleeps until the earliest one."""

from __future__ import annotations

import asyncio
from typing import Any

from sagakit.runtime import PeriodicJob, RunAgainIn
from sagakit.runtime.jobs import run_periodic


async def _runs(result: Any, enough: int) -> int:
    runs = 0
    done = asyncio.Event()
    stop = asyncio.Event()

    async def job(_: Any) -> Any:
        nonlocal runs
        runs += 1
        if runs >= enough:
            done.set()
        return result

    runtime: Any = None  # the jobs here do not use it
    task = asyncio.create_task(run_periodic(PeriodicJob("j", 3600.0, job), runtime, stop))
    try:
        await asyncio.wait_for(done.wait(), 10)  # three runs would take two hours otherwise
    except TimeoutError:
        pass
    stop.set()
    await asyncio.wait_for(task, 10)
    return runs


async def test_a_job_that_says_its_next_work_is_due_soon_runs_again_then() -> None:
    assert await _runs(RunAgainIn(0.01), enough=3) >= 3


async def test_a_next_run_already_past_means_at_once() -> None:
    assert await _runs(RunAgainIn(-5.0), enough=3) >= 3

"""PostgreSQL's postmaster SIGKILLed while the services take orders, as the OOM killer would kill
it, then the stack's ``up``: the crashed cluster starts again once its orphaned processes are
gone, the services reconnect, and orders complete again.

It runs a statement of its own in PostgreSQL, so that a backend outlives the postmaster, and
counts the test's orders in pedidos' table, those whose answer the crash lost included (the API
finds an order only by its id)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from saga_harness import config, db, stack
from saga_harness.clients import TERMINAL, Saga, new_sku, order_body
from saga_harness.waiting import current, wait_for

STOCK = 100_000
WORKERS = 3
ORPHAN_MAX_S = 30


def _postmaster_pid() -> int:
    data = Path(stack.stack("pg-data-dir").stdout.strip())
    return int((data / "postmaster.pid").read_text().splitlines()[0])


def _running(pid: int) -> bool:
    """A zombie is dead: it only waits for its new parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


async def _database_answers() -> bool:
    try:
        return bool(await asyncio.wait_for(db.fetchval("SELECT 1"), 2) == 1)
    except Exception:
        return False


class Load:
    """Workers placing one-unit orders back to back; what each request got is counted."""

    def __init__(self, saga: Saga, sku: str, customer_prefix: str) -> None:
        self.saga, self.sku, self.prefix = saga, sku, customer_prefix
        self.accepted: list[tuple[float, dict[str, Any]]] = []
        self.answers: Counter[str] = Counter()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(WORKERS)]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    def accepted_since(self, t: float) -> int:
        return sum(1 for at, _ in self.accepted if at >= t)

    async def _worker(self) -> None:
        while not self._stop.is_set():
            body = order_body([(self.sku, 1)], customer=f"{self.prefix}-{uuid.uuid4().hex[:8]}")
            try:
                r = await self.saga.http.post(f"{config.PEDIDOS}/orders", json=body, timeout=10)
            except httpx.HTTPError as exc:
                self.answers[type(exc).__name__] += 1
            else:
                self.answers[str(r.status_code)] += 1
                if r.status_code == 202:
                    self.accepted.append((time.monotonic(), r.json()))
                    continue
            # Pacing, not synchronisation: a refused request comes back at once, and the
            # workers should not spin on a service that is saying "the database is down".
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), 0.05)


@contextlib.asynccontextmanager
async def _busy_backend() -> AsyncIterator[Path]:
    """A backend in the middle of a statement, which is how a backend outlives its postmaster:
    idle ones notice its death at once, a running statement is finished first. It runs until
    the file yielded exists (at most ORPHAN_MAX_S)."""
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)  # the postgres user looks for the file
        release = Path(folder) / "release"
        conn = await asyncpg.connect(config.admin_dsn())
        tag = f"orphan-{uuid.uuid4().hex[:8]}"
        statement = asyncio.create_task(conn.execute(
            f"DO $$ BEGIN /* {tag} */ WHILE clock_timestamp() < now() + interval "
            f"'{ORPHAN_MAX_S} s' AND (pg_stat_file('{release}', true)).size IS NULL "
            "LOOP END LOOP; END $$"))
        try:
            await wait_for(lambda: db.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1",
                f"DO $$ BEGIN /* {tag} */%"), lambda n: n == 1, timeout=10,
                what="the long statement running")
            yield release
        finally:
            _release(release)
            with contextlib.suppress(Exception):
                await statement
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)


def _release(path: Path) -> None:
    path.touch()


async def _up_releasing_the_orphan(release: Path) -> tuple[int, str, bool]:
    """Runs the stack's ``up``; once it says it waits for the crashed cluster's processes,
    lets the orphaned backend finish its statement. Answers the exit code, the output and
    whether ``up`` waited."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "local_stack", "up", cwd=config.ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    assert proc.stdout is not None
    said, waited = [], False
    async with asyncio.timeout(300):
        async for raw in proc.stdout:
            line = raw.decode(errors="replace")
            said.append(line)
            if "it left to exit" in line:
                waited = True
                _release(release)
        return await proc.wait(), "".join(said), waited


async def test_postmaster_killed_under_load_then_up_brings_everything_back(saga: Saga) -> None:
    sku = new_sku()
    await saga.set_stock(sku, STOCK)
    prefix = f"pgcrash-{uuid.uuid4().hex[:8]}"
    load = Load(saga, sku, prefix)
    load.start()
    recovered = False
    try:
        await wait_for(lambda: current(len(load.accepted)), lambda n: n >= 30, timeout=30,
                       what="orders accepted before the crash")
        async with _busy_backend() as release:
            postmaster = _postmaster_pid()
            os.kill(postmaster, signal.SIGKILL)
            await wait_for(lambda: current(_running(postmaster)), lambda up: not up,
                           timeout=10, what=f"postmaster {postmaster} dead")
            # The services find out while the database is down: pedidos refuses orders.
            refused = load.answers["503"]
            await wait_for(lambda: current(load.answers["503"]), lambda n: n > refused,
                           timeout=15, what="pedidos refusing orders with 503")
            started = time.monotonic()
            rc, said, waited = await _up_releasing_the_orphan(release)
            took = time.monotonic() - started
        assert rc == 0, f"up failed after the crash:\n{said}"
        recovered = True
        assert waited, f"up did not wait for the orphaned backend:\n{said}"
        assert _postmaster_pid() != postmaster
        assert await _database_answers()
        # ``up`` leaves a service alone only if it answers /ready, database included.
        for base in (config.PEDIDOS, config.INVENTARIO, config.PAGOS):
            r = await saga.http.get(f"{base}/ready")
            assert r.status_code == 200, (base, r.text)
        after = time.monotonic()
        await wait_for(lambda: current(load.accepted_since(after)), lambda n: n >= 30,
                       timeout=30, what="orders accepted after up")
    finally:
        await load.stop()
        if not recovered:
            await _bring_back()

    assert load.accepted_since(started) < len(load.accepted), "no order accepted before the crash"
    outcomes: Counter[str] = Counter()
    for _, placed in load.accepted:
        order = await saga.wait_status(placed["order_id"], TERMINAL, timeout=60)
        outcomes[order["status"]] += 1
    assert outcomes == Counter({"COMPLETADA": len(load.accepted)}), (outcomes, load.answers)
    # Orders whose answer was lost in the crash may exist too: every order of this test in the
    # database settles, and the stock left matches the orders completed, one unit each.
    await wait_for(lambda: db.fetchval(
        "SELECT count(*) FROM pedidos.orders WHERE customer_id LIKE $1 AND status <> ALL($2)",
        f"{prefix}-%", sorted(TERMINAL)), lambda n: n == 0, timeout=60,
        what="every order of the test terminal")
    completed = await db.fetchval(
        "SELECT count(*) FROM pedidos.orders WHERE customer_id LIKE $1 AND status = 'COMPLETADA'",
        f"{prefix}-%")
    await wait_for(lambda: saga.stock(sku), lambda left: left == STOCK - completed, timeout=30,
                   what=f"stock {STOCK} - {completed} completed orders")
    print(f"\nup after the crash took {took:.1f}s; answers during the test: "
          f"{dict(load.answers)}\n" + "".join(line for line in said.splitlines(keepends=True)
                                             if "PostgreSQL" in line or "postmaster" in line))


async def _bring_back() -> None:
    """``up`` failed: keep calling it until the database is back, so that the tests after this
    one still find a stack (the failure has been recorded already)."""
    async def attempt() -> bool:
        with contextlib.suppress(RuntimeError):
            await asyncio.to_thread(stack.up)
        return await _database_answers()
    with contextlib.suppress(AssertionError):
        await wait_for(attempt, bool, timeout=120, what="the stack back after a failed up",
                       interval=1)

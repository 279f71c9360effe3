"""The pytest plugin of the harness (registered as a ``pytest11`` entry point, so every test in
the workspace has it): the running stack and a client of it as fixtures, and the ``stack``
marker on every test that needs the stack."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from saga_harness import stack
from saga_harness.clients import Saga
from saga_harness.identity import StackAuth

# The tests' own Kafka clients report every broker outage a test provokes on purpose.
logging.getLogger("aiokafka").setLevel(logging.CRITICAL)

SERVICES = ("pedidos", "inventario", "pagos")


@pytest.fixture(scope="session")
def running_stack() -> None:
    """Brings the stack up if it is not (idempotent); a part that cannot start fails the run."""
    stack.up()


@pytest.fixture
async def saga(running_stack: None) -> AsyncIterator[Saga]:
    # Authenticated as the stack's users are: orders as their customer, the rest as an operator.
    async with httpx.AsyncClient(timeout=30, auth=StackAuth()) as client:
        yield Saga(client)


@pytest.fixture
def traced(running_stack: None) -> Iterator[Path]:
    """The services export their spans to files under .local/traces for this test (one
    ``<service>.jsonl`` each, in the folder it yields), and stop once it ends."""
    folder = stack.STATE / "traces" / uuid.uuid4().hex[:8]
    folder.mkdir(parents=True)
    try:
        for svc in SERVICES:
            stack.restart(svc, {"SAGA_TRACE_FILE": str(folder / f"{svc}.jsonl")})
        yield folder
    finally:
        for svc in SERVICES:
            stack.restart(svc)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that need the running stack are marked so: `pytest -m "not stack"` skips them."""
    for item in items:
        if "running_stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.stack)

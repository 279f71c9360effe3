"""Duplicate, late and reordered delivery injected at every consumer, under load with
contention: the inbox absorbs the copies, the sagas cope with events out of order, and every
invariant of the chaos checker holds."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from chaos import scenario
from saga_harness import config, fault_plugin, identity, stack

DELIVERY_FAULTS = fault_plugin.env(duplicate_delivery=0.3, late_redelivery=0.3,
                                   reorder_delivery=0.3)
SERVICES = {"pedidos": config.PEDIDOS, "inventario": config.INVENTARIO, "pagos": config.PAGOS}


@pytest.fixture
def faulty_delivery(running_stack: None) -> Iterator[None]:
    for service in SERVICES:
        stack.restart(service, DELIVERY_FAULTS)
    try:
        yield
    finally:
        for service in SERVICES:
            stack.restart(service)


async def _duplicates_absorbed(url: str) -> float:
    async with httpx.AsyncClient(timeout=10) as http:
        text = (await http.get(f"{url}/metrics", headers=identity.operator_headers())).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("saga_messages_consumed_total{")
               and 'outcome="duplicate"' in line)


async def test_duplicated_late_and_swapped_deliveries_break_no_invariant(
        faulty_delivery: None) -> None:
    report = await scenario.run("delivery-faults", [], seed=11, rate=5.0, load_s=10.0,
                                skus=2, units=8)
    print(report.render())
    assert len(report.acknowledged) == 50
    # Every acknowledged order, and any whose answer was lost, reached a terminal state.
    assert sum(report.outcomes.values()) >= len(report.acknowledged)
    assert report.violations == []
    # The faults were really applied: every consumer absorbed copies it was handed.
    absorbed = await asyncio.gather(*(_duplicates_absorbed(u) for u in SERVICES.values()))
    assert all(n > 0 for n in absorbed), dict(zip(SERVICES, absorbed, strict=True))
    # Contention made both outcomes happen, so the swapped events touched both paths.
    assert report.outcomes.get("COMPLETADA", 0) > 0
    assert len(report.outcomes) > 1

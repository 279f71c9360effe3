"""A short chaos scenario in every test run: orders with contention while a service is killed
right after its commits, the database crashes, then another service is killed, and a third of
the orders are cancelled through the API at random moments. After healing, every invariant
holds (the full set of seeded schedules is `make chaos`)."""

from __future__ import annotations

from chaos import scenario


async def test_services_and_database_killed_under_load(running_stack: None) -> None:
    faults = [scenario.Fault(2.0, "kill", "inventario", 2.0),
              scenario.Fault(5.0, "kill", "postgres", 2.0),
              scenario.Fault(9.0, "kill", "pagos", 1.5)]
    report = await scenario.run("smoke", faults, seed=42, rate=5.0, load_s=14.0,
                                cancel_share=0.3)
    print(report.render())
    assert report.acknowledged, "the load reached the stack"
    # Every acknowledged order, and any whose answer was lost, reached a terminal state.
    assert sum(report.outcomes.values()) >= len(report.acknowledged)
    assert report.violations == []

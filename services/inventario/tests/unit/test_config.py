"""inventario's timeouts (docs/standard.md#timeouts-of-each-service): a statement may take
INVENTARIO_STATEMENT_TIMEOUT_S, a row lock may be waited for INVENTARIO_LOCK_TIMEOUT_S. The
allocation's statement waits for its products' locks, and a statement's timeout covers its lock
waits: it is given both, so that the lock timeout is what ends a wait (ADR 0001), whichever of the
two is set longer."""

from __future__ import annotations

import pytest

from inventario.config import InventarioSettings


def test_by_default_a_lock_is_waited_for_10_s_within_a_15_s_allocation() -> None:
    settings = InventarioSettings()
    assert (settings.lock_timeout_s, settings.statement_timeout_s) == (10, 5)
    assert settings.allocation_statement_timeout_s == 15


@pytest.mark.parametrize(("lock_s", "statement_s"), [(10, 5), (10, 30), (0.5, 60), (60, 0.1)])
def test_the_allocations_statement_outlasts_its_lock_waits(lock_s: float,
                                                           statement_s: float) -> None:
    settings = InventarioSettings(lock_timeout_s=lock_s, statement_timeout_s=statement_s)
    assert settings.allocation_statement_timeout_s > settings.lock_timeout_s
    assert settings.allocation_statement_timeout_s > settings.statement_timeout_s

"""A burst on the running stack, measured as `make bench` measures it: every order is placed
at once and accounted for from the databases, and under reserve_then_pay none is refunded for
losing the race while Check-Then-Pay's orders for the same units are checked as before."""

from __future__ import annotations

import httpx

from bench import burst, load
from saga_harness.identity import StackAuth

ORDERS = 16


async def test_a_burst_under_each_strategy_is_accounted_for_from_the_databases(
        running_stack: None) -> None:
    load.authenticate()
    asks = burst.quantities(ORDERS, seed=3)
    async with httpx.AsyncClient(auth=StackAuth(), timeout=30) as http:
        measured = {strategy: await burst.one_burst(http, strategy, 0.25, asks, "test",
                                                    from_quiet=False)
                    for strategy in ("check_then_pay", "reserve_then_pay")}
    for strategy, b in measured.items():
        counts = b["counts"]
        assert b["accepted"] == ORDERS and b["http_errors"] == 0 and b["unfinished"] == 0, \
            strategy
        assert b["units"] == 4
        assert counts["refunds"] == counts["refunds_race_lost"] + counts["refunds_other"]
        assert sum(counts[k] for k in ("completed", "refunds", "no_stock", "declined",
                                       "other")) == ORDERS, (strategy, counts)
        assert counts["completed"] >= 1 and b["completed_per_s"] > 0, (strategy, b)
        assert 0 <= b["units_left"] < b["units"], "units were sold, never oversold"
    check, reserve = measured["check_then_pay"], measured["reserve_then_pay"]
    assert check["reserved_sagas"] == 0
    assert reserve["counts"]["refunds_race_lost"] == 0, reserve["counts"]
    assert reserve["reserved_sagas"] >= reserve["counts"]["completed"]

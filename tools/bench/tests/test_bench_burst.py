"""The burst contention scenario's arithmetic and its word with inventario: outcomes told apart
(a refund lost to the race from any other, from no stock and from a decline), figures per 100
orders over the rounds, the no-contention goal, the printed table and the plot; and a stack
that does not take allocation strategies fails the run before anything is measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench import burst, burst_report, goals
from saga_harness import strategies


def test_a_refund_after_a_failed_allocation_is_told_apart_from_every_other_outcome() -> None:
    counts = burst.tally([("COMPLETADA", "ALLOCATED"), ("CANCELADA_CON_REEMBOLSO", "FAILED"),
                          ("REEMBOLSO_FALLIDO", "FAILED"),
                          ("CANCELADA_CON_REEMBOLSO", "RELEASED"),  # cancelled after the charge
                          ("CANCELADA_CON_REEMBOLSO", None),
                          ("CANCELADA_SIN_STOCK", None), ("CANCELADA_PAGO_RECHAZADO", None),
                          ("CANCELADA_TIMEOUT", "BLOCKED")])
    assert counts == {"completed": 1, "refunds": 4, "refunds_race_lost": 2,
                      "refunds_other": 2, "no_stock": 1, "declined": 1, "other": 1}


def test_every_strategy_of_a_round_gets_the_same_orders_and_a_ratio_its_units() -> None:
    assert burst.quantities(40, seed=250) == burst.quantities(40, seed=250)
    assert set(burst.quantities(200, seed=1)) == {1, 2, 3}
    assert [burst.units_for(r, 40) for r in burst.RATIOS] == [40, 20, 10, 4]
    assert burst.units_for(0.1, 4) == 1, "never a product of no units"


def _burst(completed: int, race_lost: int, no_stock: int, per_s: float | None,
           reserved: int | None = None) -> dict[str, Any]:
    counts = dict.fromkeys(("completed", "refunds", "refunds_race_lost", "refunds_other",
                            "no_stock", "declined", "other"), 0)
    counts.update(completed=completed, refunds=race_lost, refunds_race_lost=race_lost,
                  no_stock=no_stock)
    return {"orders": completed + race_lost + no_stock, "units": 10, "counts": counts,
            "completed_per_s": per_s, "reserved_sagas": reserved, "http_errors": 0,
            "unfinished": 0, "saga_ids": ["s"]}


def test_a_cell_sums_its_rounds_per_100_orders_and_takes_the_median_rate() -> None:
    c = burst.cell("check_then_pay", 0.25,
                   [_burst(5, 31, 4, 4.5), _burst(6, 30, 4, 5.5), _burst(4, 32, 4, None)],
                   {"p99_ms": 812.0})
    assert c["orders"] == 120 and c["counts"]["refunds_race_lost"] == 93
    assert c["per_100_orders"]["refunds_race_lost"] == 77.5
    assert c["per_100_orders"]["completed"] == 12.5
    assert c["completed_per_s"] == 5.0, "the bursts that completed nothing have no rate"
    assert c["p99_ms"] == 812.0 and c["reserved_sagas"] is None
    assert "saga_ids" not in c["bursts"][0]


def _no_contention(check: float, reserve: float) -> dict[str, Any]:
    by = {"check_then_pay": {"sagas_per_s": check, "p99_ms": 300.0},
          "reserve_then_pay": {"sagas_per_s": reserve, "p99_ms": 320.0}}
    return {"clients": 16, "seconds": 10, "products": 50, "by_strategy": by,
            **burst.share_of_check_then_pay(by)}


def test_reserve_then_pay_without_contention_is_held_to_nine_tenths_of_check_then_pay() -> None:
    met = goals.reserve_without_contention({"burst": {"no_contention": _no_contention(100, 93)}})
    assert met.met and "×0.93" in met.measured
    missed = goals.reserve_without_contention(
        {"burst": {"no_contention": _no_contention(100, 80)}})
    assert not missed.met and missed.missed_by == "×1.12"
    absent = goals.reserve_without_contention({})
    assert not absent.met and absent.missed_by == "not measured"


def test_the_table_and_the_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cells = [{**burst.cell(s, r, [_burst(5, 30 if s == "check_then_pay" else 0, 5, 4.0,
                                         None if s == "check_then_pay" else 9)],
                           {"p99_ms": 700.0}), "ratio": r}
             for r in burst.RATIOS for s in ("check_then_pay", "reserve_then_pay")]
    results = {"burst": {"orders_per_burst": 40, "rounds": 1, "ratios": list(burst.RATIOS),
                         "strategies": ["check_then_pay", "reserve_then_pay"], "cells": cells,
                         "no_contention": _no_contention(100, 95)}}
    burst_report.report(results)
    out = capsys.readouterr().out
    assert "== burst contention: 40 orders at once" in out
    assert "0.25 check_then_pay        75.0      75.0" in out
    assert "reserve_then_pay ×0.95 of check_then_pay (goal: reserve_then_pay ≥ ×0.90 — met)" \
        in out
    burst_report.plot(results, tmp_path / "burst.png")
    assert (tmp_path / "burst.png").read_bytes()[:4] == b"\x89PNG"


def _inventario(knows_strategies: bool, shows: str | None = None) -> httpx.AsyncClient:
    """A stand-in for inventario's PUT /products: today's (the field refused, as any unknown
    field is) or one with strategies (it shows what it stored)."""
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if "allocation_strategy" in body and not knows_strategies:
            return httpx.Response(422, json={"detail": [{
                "type": "extra_forbidden", "loc": ["body", "allocation_strategy"],
                "msg": "Extra inputs are not permitted"}]})
        product = {"sku": "X", "quantity": body["quantity"]}
        if knows_strategies:
            product["allocation_strategy"] = shows or body.get("allocation_strategy",
                                                               "check_then_pay")
        return httpx.Response(200, json=product)

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


async def test_a_stack_without_strategies_is_check_then_pay_and_refuses_the_others() -> None:
    async with _inventario(knows_strategies=False) as http:
        await burst.stock(http, "X", 10, "check_then_pay")
        with pytest.raises(strategies.StrategyRefused, match="BENCH_STRATEGIES=check_then_pay"):
            await burst.stock(http, "X", 10, "reserve_then_pay")


async def test_a_stack_with_strategies_must_show_the_one_asked() -> None:
    async with _inventario(knows_strategies=True) as http:
        await burst.stock(http, "X", 10, "reserve_then_pay")
    async with _inventario(knows_strategies=True, shows="check_then_pay") as http:
        with pytest.raises(strategies.StrategyRefused, match="not 'auto'"):
            await burst.stock(http, "X", 10, "auto")


def test_unknown_strategies_are_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_STRATEGIES", "check_then_pay,reserve_first")
    with pytest.raises(SystemExit, match="unknown reserve_first"):
        burst.Settings.from_env(quick=False)
    monkeypatch.setenv("BENCH_STRATEGIES", "check_then_pay")
    assert burst.Settings.from_env(quick=True) == burst.Settings(20, 1, ("check_then_pay",))

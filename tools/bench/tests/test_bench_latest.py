"""bench-results/latest.json: the headline figures in the shape the black-box contract names
(``{"machine", "floor": {"p50_ms", "sagas_per_s_ceiling"}, "systems": {"this": M}}``), taken
from the run's own figures."""

from __future__ import annotations

from typing import Any

from bench import run as bench_run


def step(rate: float, p50: float, p99: float, cpu: dict[str, float]) -> dict[str, Any]:
    return {"target_rate_per_s": rate, "latency": {"p50_ms": p50, "p99_ms": p99},
            "cpu_ms_per_saga": cpu}


def results() -> dict[str, Any]:
    return {"machine": {"cores": 2}, "floor_one_saga_ms": 10.12,
            "cpu_floor": {"cpu_ms_per_saga": 4.43, "ceiling_sagas_per_s": 452},
            "max_sustained_sagas_per_s_p99_under_1s": 127.5,
            "open_loop": [step(10.0, 34.34, 49.15, {"postgres": 9.11, "pedidos": 15.19}),
                          step(50.0, 126.04, 292.48, {"postgres": 7.3, "pedidos": 9.47}),
                          step(200.0, 5468.56, 8228.41, {"postgres": 4.97, "kafka": 0.8,
                                                         "pedidos": 3.73})]}


def test_the_headline_has_the_contracts_shape_and_the_runs_figures() -> None:
    head = bench_run.headline(results())
    assert head["floor"] == {"p50_ms": 10.12, "p50_ms_paced": None, "sagas_per_s_ceiling": 452.0,
                             "cpu_ms_per_saga": 4.43}
    assert head["systems"] == {"this": {"p50_ms_at_10": 34.34, "p99_ms_at_50": 292.48,
                                        "sagas_per_s_p99_under_1s": 127.5,
                                        "cpu_ms_per_saga_saturated": 9.5}}
    for figure in [head["floor"]["p50_ms"], head["floor"]["sagas_per_s_ceiling"],
                   *head["systems"]["this"].values()]:
        assert isinstance(figure, float)


def test_a_rate_the_run_did_not_offer_is_none_not_a_guess() -> None:
    r = results()
    r["open_loop"] = r["open_loop"][:1]  # BENCH_RATES=10
    this = bench_run.headline(r)["systems"]["this"]
    assert this["p50_ms_at_10"] == 34.34
    assert this["p99_ms_at_50"] is None
    # The CPU a saga is taken at the highest rate the run offered, here 10/s.
    assert this["cpu_ms_per_saga_saturated"] == 24.3


def test_with_the_comparison_every_system_comes_from_its_blocks() -> None:
    from bench import compare

    def block(name: str, p50: float, best: float, cpu: float) -> dict[str, Any]:
        return {"system": name,
                "open_loop": [{**step(10.0, p50, 2 * p50, {}), "sustained_sagas_per_s": 10.0,
                               "unfinished": 0, "commits_per_saga": 9.0,
                               "wal_bytes_per_saga": 9000}],
                "closed_loop": [
                    {"concurrency": 8, "sagas_per_s": best, "latency": {"p99_ms": 800.0},
                     "cpu_ms_per_saga_total": cpu + 1, "cpu_ms_per_saga": {"dbos": cpu + 1},
                     "commits_per_saga": 8.0, "wal_bytes_per_saga": 7000},
                    # Saturated past the 1 s line: the CPU figure, not the throughput one.
                    {"concurrency": 16, "sagas_per_s": best + 5, "latency": {"p99_ms": 1500.0},
                     "cpu_ms_per_saga_total": cpu, "cpu_ms_per_saga": {"dbos": cpu},
                     "commits_per_saga": 7.0, "wal_bytes_per_saga": 6000}]}

    blocks = [block("dbos", 20.0, 40.0, 28.0), block("dbos", 24.0, 50.0, 30.0)]
    r = {**results(), "comparison": {"systems": {
        "this": {**compare.summarise([block("this", 30.0, 140.0, 16.0)])},
        "dbos": compare.summarise(blocks)}}}
    head = bench_run.headline(r)
    dbos = head["systems"]["dbos"]
    assert (dbos["p50_ms_at_10"], dbos["sagas_per_s_p99_under_1s"],
            dbos["cpu_ms_per_saga_saturated"]) == (22.0, 45.0, 29.0)  # medians of two blocks
    assert dbos["p99_ms_at_50"] is None
    assert dbos["commits_per_saga_saturated"] == 7.0
    assert head["systems"]["this"]["sagas_per_s_p99_under_1s"] == 140.0
    assert "blocks" not in dbos

"""The benchmark's verdicts and its profile of the hot component (issue 6): each goal judged
met or missed by how much from a run's figures, the hottest part chosen by CPU per saga, and
py-spy's samples of a real process summed by package."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

from bench import baselines, goals, pg_statements, profile


def run(*, rate50: dict[str, Any] | None = None, low_p50: float = 40.0, floor: float = 15.0,
        best: float = 36.0, idle: float = 4.2) -> dict[str, Any]:
    steps = [{"target_rate_per_s": 10.0, "sustained_sagas_per_s": 9.9, "unfinished": 0,
              "latency": {"p50_ms": low_p50, "p99_ms": 70.0},
              "cpu_ms_per_saga": {"postgres": 13.0, "pedidos": 12.0, "pagos": 9.0}}]
    if rate50 is not None:
        steps.append({"target_rate_per_s": 50.0, "unfinished": 0, **rate50})
    return {"open_loop": steps, "floor_one_saga_ms": floor, "floor_one_saga_paced_ms": 2 * floor,
            "max_sustained_sagas_per_s_p99_under_1s": best, "idle": {"total_pct_of_core": idle}}


def test_a_rate_not_sustained_misses_the_50_per_s_goal_by_its_throughput() -> None:
    g = goals.latency_at_50(run(rate50={"sustained_sagas_per_s": 37.2,
                                         "latency": {"p50_ms": 2300.0, "p99_ms": 7900.0}}))
    assert not g.met
    assert g.missed_by is not None and g.missed_by.startswith("×1.3 in throughput")


def test_a_sustained_rate_is_judged_by_the_worse_of_p50_and_p99() -> None:
    ok = goals.latency_at_50(run(rate50={"sustained_sagas_per_s": 49.8,
                                          "latency": {"p50_ms": 45.0, "p99_ms": 240.0}}))
    assert ok.met and ok.missed_by is None
    slow = goals.latency_at_50(run(rate50={"sustained_sagas_per_s": 49.8,
                                            "latency": {"p50_ms": 45.0, "p99_ms": 500.0}}))
    assert not slow.met and slow.missed_by == "×2.0 in latency"


def test_unfinished_orders_mean_the_rate_was_not_sustained() -> None:
    g = goals.latency_at_50(run(rate50={"sustained_sagas_per_s": 49.0, "unfinished": 3,
                                         "latency": {"p50_ms": 30.0, "p99_ms": 90.0}}))
    assert not g.met


def test_no_step_at_50_per_s_is_a_goal_not_measured_not_a_goal_met() -> None:
    g = goals.latency_at_50(run())
    assert not g.met and g.missed_by == "not measured"


def test_the_50_per_s_verdict_says_how_many_cores_the_stack_kept_busy() -> None:
    r = {**run(rate50={"sustained_sagas_per_s": 48.8, "latency": {"p50_ms": 120.0,
                                                                  "p99_ms": 193.0},
                       "cpu_ms_per_saga": {"postgres": 7.5, "kafka": 6.0, "pedidos": 8.0,
                                           "inventario": 6.0, "pagos": 6.0, "gateway": 2.0}}),
         "machine": {"cores": 2}}
    g = goals.latency_at_50(r)
    assert not g.met and g.missed_by == "×2.4 in latency"
    assert g.measured.endswith("the stack using 1.73 of the 2 cores")  # 35.5 ms × 48.8/s


def test_throughput_floor_multiple_and_idle_are_judged_against_their_limits() -> None:
    r = run(low_p50=51.0, floor=14.7, best=36.2, idle=4.2)
    throughput, floor, idle = goals.throughput(r), goals.within_floor(r), goals.idle(r)
    assert not throughput.met and throughput.missed_by == "×5.5"
    assert not floor.met and floor.missed_by == "6.9 ms (×1.2)"
    assert idle.met
    assert goals.within_floor(run(low_p50=44.0, floor=14.7)).met
    assert not goals.idle(run(idle=5.0)).met


def test_the_cpu_floor_is_seven_transactions_and_six_messages_and_bounds_the_rate() -> None:
    floor = baselines.cpu_floor({"rate_16_clients_per_s": 4000, "cpu_ms_per_tx_16_clients": 0.5},
                                {"cpu_ms_per_message_16_senders": 0.25}, cores=2)
    assert floor == {"cpu_ms_per_saga": 5.0, "ceiling_sagas_per_s": 400}
    g = goals.throughput({**run(best=80.0), "cpu_floor": floor})
    assert not g.met and g.missed_by == "×2.5"
    assert "would allow 400/s" in g.measured and "2.0× it" in g.measured


def _baselines(pg_ms: float, hop_ms: float, when: str) -> dict[str, Any]:
    return {"when": when,
            "pg": {"single_client": {"p50_ms": pg_ms}, "single_client_paced": {"p50_ms": 2 * pg_ms},
                   "cpu_ms_per_tx_16_clients": pg_ms / 2},
            "hop": {"produce_to_consume": {"p50_ms": hop_ms},
                    "produce_to_consume_paced": {"p50_ms": 2 * hop_ms},
                    "cpu_ms_per_message_16_senders": 0.1}}


def test_the_floor_takes_each_baseline_from_its_fastest_measurement() -> None:
    slow_pg, slow_hop = _baselines(2.0, 0.6, "after the warm-up"), _baselines(1.0, 1.8, "at the end")
    chosen = baselines.fastest([slow_pg, slow_hop])
    assert chosen == {"pg": slow_hop["pg"], "hop": slow_pg["hop"]}
    assert baselines.floor_ms(chosen["pg"], chosen["hop"]) == 7 * 1.0 + 6 * 0.6
    assert baselines.floor_ms(chosen["pg"], chosen["hop"], paced=True) == 7 * 2.0 + 6 * 1.2


def test_every_step_is_a_multiple_of_the_floor_chosen_at_the_end() -> None:
    from bench import run as bench_run

    results = {**run(low_p50=45.0), "machine": {"cores": 2}}
    bench_run.with_floor(results, [_baselines(2.0, 2.0, "after the warm-up"),
                                   _baselines(1.0, 1.0, "at the end")])
    assert results["floor_one_saga_ms"] == 13.0 and results["floor_one_saga_paced_ms"] == 26.0
    assert results["open_loop"][0]["p50_multiple_of_floor"] == round(45.0 / 13.0, 1)
    assert [m["when"] for m in results["baseline_measurements"]] == ["after the warm-up",
                                                                    "at the end"]
    assert results["cpu_floor"]["cpu_ms_per_saga"] == 7 * 0.5 + 6 * 0.1
    assert not goals.within_floor(results).met  # 45 ms against 3 × 13; met against the slower 3 × 26


def test_the_hottest_part_is_taken_from_the_highest_rate() -> None:
    r = run(rate50={"sustained_sagas_per_s": 37.0, "latency": {"p50_ms": 1.0, "p99_ms": 1.0},
                    "cpu_ms_per_saga": {"postgres": 13.0, "pedidos": 11.0, "pagos": 12.5}})
    assert goals.hottest(r["open_loop"], ("pedidos", "pagos")) == ("pagos", 12.5)
    assert goals.hottest(r["open_loop"], ("postgres", "pedidos", "pagos")) == ("postgres", 13.0)
    assert goals.hottest([], ("pedidos",)) is None


def test_the_hottest_part_at_a_given_rate_is_taken_from_that_step() -> None:
    r = run(rate50={"sustained_sagas_per_s": 37.0, "latency": {"p50_ms": 1.0, "p99_ms": 1.0},
                    "cpu_ms_per_saga": {"postgres": 13.0, "pedidos": 11.0, "pagos": 12.5}})
    # At 10/s pedidos spent the most of the Python services, at 50/s pagos.
    assert goals.hottest(r["open_loop"], ("pedidos", "pagos"), 10.0) == ("pedidos", 12.0)
    assert goals.step_at(r["open_loop"], 10.0) is r["open_loop"][0]
    assert goals.hottest(r["open_loop"], ("pedidos",), 25.0) is None


def test_frames_are_attributed_to_their_package() -> None:
    site = "/w/.venv/lib/python3.11/site-packages"
    assert profile.package_of(f"execute ({site}/asyncpg/connection.py:377)") == "asyncpg"
    assert profile.package_of(f"emit ({site}/sagakit/structured_logging.py:40)") == "sagakit"
    assert profile.package_of("track (/w/services/pedidos/src/pedidos/usecases/x.py:9)") \
        == "pedidos"
    assert profile.package_of("run (/usr/lib/python3.11/asyncio/runners.py:118)") == "asyncio"
    assert profile.package_of("_path_stat (<frozen importlib._bootstrap_external>:147)") \
        == "importlib"
    # py-spy's own shortening: the path from the sys.path entry the module was found in.
    assert profile.package_of("__do_execute (asyncpg/prepared_stmt.py:257)") == "asyncpg"
    assert profile.package_of("emit (logging/__init__.py:1113)") == "logging"
    assert profile.package_of("__new__ (ssl.py:500)") == "ssl"


def test_samples_are_summed_by_innermost_package_and_by_presence_on_the_stack() -> None:
    site = "/v/lib/python3.11/site-packages"
    raw = "\n".join([
        f"main (app.py:1);handle ({site}/sagakit/c.py:2);execute ({site}/asyncpg/c.py:3) 6",
        f"main (app.py:1);handle ({site}/sagakit/c.py:2) 3",
        "main (app.py:1);dumps (/usr/lib/python3.11/json/encoder.py:9) 1",
        "",
    ])
    p = profile.summarise(raw)
    assert p.samples == 10
    assert dict(p.leaf_by_package) == {"asyncpg": 0.6, "sagakit": 0.3, "json": 0.1}
    assert dict(p.inclusive_by_package)["sagakit"] == 0.9
    assert p.top_leaf_functions[0] == (f"execute ({site}/asyncpg/c.py:3)", 0.6)


def test_a_socket_write_and_the_collector_are_told_apart_from_the_line_they_ran_under() -> None:
    site = "/v/lib/python3.11/site-packages"
    execute = f"_do_execute ({site}/asyncpg/connection.py:2069)"
    raw = "\n".join([
        # Waiting in write(2) for a core, under asyncpg's statement execution.
        f"main (app.py:1);{execute};CoreProtocol__bind_execute (protocol.c:55447);"
        "UVStream__try_write (loop.c:106818);write (libc.so.6) 5",
        # The collector, run by an allocation in the same place.
        f"main (app.py:1);{execute};_PyObject_GC_Link (gcmodule.c:2250);"
        "gc_collect_main (libpython3.11.so.1.0) 2",
        # asyncpg's own encoding of the arguments: asyncpg's.
        f"main (app.py:1);{execute};CoreProtocol__build_bind_message (protocol.c:54305) 3",
    ])
    p = profile.summarise(raw)
    assert dict(p.leaf_by_package) == {profile.SOCKET_WRITE: 0.5, "asyncpg": 0.3,
                                       profile.GARBAGE_COLLECTOR: 0.2}
    assert dict(p.top_leaf_functions)[f"{profile.SOCKET_WRITE} under {execute}"] == 0.5
    assert dict(p.inclusive_by_package)["asyncpg"] == 1.0
    assert "other" not in dict(p.inclusive_by_package), "native frames count for their caller"


BUSY = """
import sys
def spin_in_a_known_place():
    while True:
        sum(i * i for i in range(1000))
sys.stdout.write("ready\\n"); sys.stdout.flush()
spin_in_a_known_place()
"""


@pytest.mark.parametrize("native", [True, False])
def test_py_spy_finds_where_a_real_process_spends_its_time(native: bool) -> None:
    child = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        p = asyncio.run(profile.record(child.pid, 2, rate_hz=200, native=native))
    finally:
        child.kill()
        child.wait()
    assert p.samples > 100
    spinning = sum(share for fn, share in p.top_leaf_functions if "spin_in_a_known_place" in fn
                   or "<genexpr>" in fn)
    assert spinning > 0.8


def test_postgres_statements_are_reported_per_saga_longest_first() -> None:
    rows = [
        {"calls": 100, "total_exec_time": 50.0, "rows": 100, "blocks": 1000,
         "query": "WITH moved_order AS (\n  UPDATE pedidos.orders SET status = $1 ...)"},
        {"calls": 200, "total_exec_time": 250.0, "rows": 200, "blocks": 800,
         "query": "WITH wanted AS (SELECT l.sku FROM jsonb_to_recordset($1))  " + "x" * 200},
        {"calls": 0, "total_exec_time": 0.0, "rows": 0, "blocks": 0, "query": "SELECT 1"},
        # The same text prepared with other parameter types: a row of its own, counted as one.
        {"calls": 100, "total_exec_time": 100.0, "rows": 100, "blocks": 400,
         "query": "WITH moved_order AS ( UPDATE pedidos.orders SET status = $1 ...)"},
    ]
    summary = pg_statements.summarise(rows, sagas=100, n=2)
    assert summary["statements_ms_per_saga"] == 4.0
    first, second = summary["top"]
    assert first["statement"].startswith("WITH wanted AS (SELECT l.sku")
    assert len(first["statement"]) == 110 and first["statement"].endswith("…")
    assert (first["calls_per_saga"], first["ms_per_call"], first["ms_per_saga"],
            first["share"], first["blocks_per_call"]) == (2.0, 1.25, 2.5, 0.625, 4.0)
    assert second["statement"] == "WITH moved_order AS ( UPDATE pedidos.orders SET status = $1 ...)"
    assert (second["calls_per_saga"], second["ms_per_call"], second["ms_per_saga"],
            second["share"], second["blocks_per_call"]) == (2.0, 0.75, 1.5, 0.375, 7.0)

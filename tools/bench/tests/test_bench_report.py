"""The benchmark's verdicts and its profile of the hot component: each goal judged met or
missed by how much from a run's figures (ratios to the best DBOS shape and to the floor), the
hottest part chosen by CPU per saga, and py-spy's samples of a real process summed by package."""

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


def compared(this: dict[str, float | None], **peers: dict[str, float | None]
             ) -> dict[str, Any]:
    return {**run(), "floor_one_saga_ms": 6.5, "floor_one_saga_paced_ms": 17.8,
            "systems": {"this": this, **peers}}


def test_each_ratio_goal_is_judged_against_the_best_peer_shape_for_that_figure() -> None:
    r = compared({"p50_ms_at_10": 20.0, "sagas_per_s_p99_under_1s": 150.0,
                  "cpu_ms_per_saga_saturated": 16.0},
                 dbos={"p50_ms_at_10": 20.4, "sagas_per_s_p99_under_1s": 46.0,
                       "cpu_ms_per_saga_saturated": 28.0},
                 dbos_per_core={"p50_ms_at_10": 25.0, "sagas_per_s_p99_under_1s": 80.0,
                                "cpu_ms_per_saga_saturated": 30.0})
    # The best peer for throughput is the per-core shape (80/s), for latency and CPU the
    # single process.
    throughput = goals.throughput_vs_peer(r)
    assert not throughput.met and throughput.missed_by == "×1.07"
    assert "dbos_per_core 80" in throughput.measured
    assert goals.latency_vs_peer(r).met
    cpu = goals.cpu_vs_peer(r)
    assert cpu.met and "×0.57" in cpu.measured


def test_latency_is_missed_by_its_ratio_to_the_peer_and_to_the_paced_floor() -> None:
    r = compared({"p50_ms_at_10": 28.7}, dbos={"p50_ms_at_10": 20.4})
    peer = goals.latency_vs_peer(r)
    assert not peer.met and peer.missed_by == "×1.41"
    floor = goals.latency_vs_floor(r)
    assert not floor.met and floor.missed_by == "×1.34"  # 28.7 / 17.8 = 1.61, over 1.2
    assert goals.latency_vs_floor(compared({"p50_ms_at_10": 21.0})).met


def test_without_a_peer_the_ratio_goals_are_not_measured_not_met() -> None:
    r = compared({"p50_ms_at_10": 20.0, "sagas_per_s_p99_under_1s": 150.0})
    for goal in (goals.throughput_vs_peer(r), goals.latency_vs_peer(r), goals.cpu_vs_peer(r)):
        assert not goal.met and goal.missed_by == "not measured"
    # A peer that did not measure a figure (no step at that rate) is not a peer for it.
    r = compared({"p50_ms_at_10": 20.0}, dbos={"p50_ms_at_10": None})
    assert goals.latency_vs_peer(r).missed_by == "not measured"


def test_idle_is_judged_against_its_limit() -> None:
    assert goals.idle(run(idle=4.2)).met
    assert not goals.idle(run(idle=5.0)).met


def test_the_ratio_table_has_every_figure_this_over_the_best_peer_and_over_the_floor() -> None:
    from bench import report

    r = {"systems": {"this": {"p50_ms_at_10": 30.0, "sagas_per_s_p99_under_1s": 150.0,
                              "cpu_ms_per_saga_saturated": 15.0},
                     "dbos": {"p50_ms_at_10": 20.0, "sagas_per_s_p99_under_1s": 50.0,
                              "cpu_ms_per_saga_saturated": 30.0}},
         "floor": {"p50_ms": 6.0, "p50_ms_paced": 15.0, "sagas_per_s_ceiling": 600.0,
                   "cpu_ms_per_saga": 3.0}}
    rows = {label: (values, to_peer, to_floor) for label, values, to_peer, to_floor, _
            in report.ratio_rows(r)}
    assert rows["p50 at 10/s (ms)"] == ({"this": 30.0, "dbos": 20.0}, 1.5, 2.0)
    assert rows["sagas/s with p99 < 1 s"][1:] == (3.0, 0.25)
    assert rows["CPU ms a saga, saturated"][1:] == (0.5, 5.0)
    assert rows["p99 at 50/s (ms)"] == ({"this": None, "dbos": None}, None, None)


def test_the_cpu_floor_is_seven_transactions_and_six_messages_and_bounds_the_rate() -> None:
    floor = baselines.cpu_floor({"rate_16_clients_per_s": 4000, "cpu_ms_per_tx_16_clients": 0.5},
                                {"cpu_ms_per_message_16_senders": 0.25}, cores=2)
    assert floor == {"cpu_ms_per_saga": 5.0, "ceiling_sagas_per_s": 400}


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


def test_waiting_threads_are_left_out_of_the_shares() -> None:
    # As py-spy --native records them: an idle thread-pool worker and a server's poll loop.
    bootstrap = ("thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);"
                 "Thread.run (threading.py:982)")
    raw = "\n".join([
        "<module> (app.py:10);spin (app.py:8) 6",
        f"{bootstrap};_worker (concurrent/futures/thread.py:81);"
        "_queue_SimpleQueue_get (_queuemodule.c.h:177);"
        "PyThread_acquire_lock_timed (libpython3.11.so.1.0);0x7f306f6a (libc.so.6) 7",
        f"{bootstrap};BaseServer.serve_forever (socketserver.py:233);"
        "_PollLikeSelector.select (selectors.py:415);select_poll_poll (selectmodule.c.h:223);"
        "poll (libc.so.6) 11",
        "<module> (app.py:10);run (asyncio/runners.py:118);UVLoop_run (loop.c:1);"
        "epoll_wait (libc.so.6) 3",
        "<module> (app.py:10);send (app.py:9);write (libc.so.6) 4",
    ])
    p = profile.summarise(raw)
    assert (p.samples, p.waiting_samples) == (10, 21)
    assert dict(p.leaf_by_package) == {"app": 0.6, profile.SOCKET_WRITE: 0.4}
    assert "concurrent" not in dict(p.inclusive_by_package)


IDLE_THREADS = """
import concurrent.futures, http.server, socketserver, sys, threading
pool = concurrent.futures.ThreadPoolExecutor(1)
pool.submit(lambda: None).result()
server = socketserver.TCPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
threading.Thread(target=server.serve_forever, daemon=True).start()
def spin_in_a_known_place():
    while True:
        sum(i * i for i in range(1000))
sys.stdout.write("ready\\n"); sys.stdout.flush()
spin_in_a_known_place()
"""


def test_py_spy_s_idle_threads_of_a_real_process_count_as_waiting() -> None:
    child = subprocess.Popen([sys.executable, "-c", IDLE_THREADS], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        p = asyncio.run(profile.record(child.pid, 2, rate_hz=200, native=True))
    finally:
        child.kill()
        child.wait()
    packages = dict(p.leaf_by_package)
    assert p.waiting_samples > 0
    assert "concurrent" not in packages and "selectors" not in packages, packages


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

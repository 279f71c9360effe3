"""What `make bench` prints and plots from its results: the floor, the open-loop table, the
bursts (``bench/burst_report.py``), the goals, the profile, and the latency plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import burst_report, goals, profile


def ms(x: Any) -> str:
    return f"{x:8.1f}" if isinstance(x, int | float) else f"{'-':>8}"


def report(r: dict[str, Any]) -> None:
    pg, hop = r["baseline_pg_step"], r["baseline_kafka_hop"]["produce_to_consume"]
    print("\n== floor")
    paced_hop = r["baseline_kafka_hop"]["produce_to_consume_paced"]
    print(f"  PostgreSQL saga step: p50 {pg['single_client']['p50_ms']} ms back to back, "
          f"{pg['single_client_paced']['p50_ms']} ms after a pause; "
          f"{list(pg.values())[1]} tx/s with 16 clients")
    print(f"  Kafka hop (produce → consume): p50 {hop['p50_ms']} ms back to back, "
          f"{paced_hop['p50_ms']} ms after a pause; p99 {hop['p99_ms']} ms")
    print(f"  floor of one saga (7 tx + 6 hops): {r['floor_one_saga_ms']} ms back to back, "
          f"{r['floor_one_saga_paced_ms']} ms paced")
    if r.get("baseline_measurements"):
        print("  measured (the floor takes the fastest of each baseline):")
    for m in r.get("baseline_measurements", []):
        print(f"    {m['when']}: PostgreSQL step p50 {m['pg']['single_client']['p50_ms']} ms, "
              f"Kafka hop p50 {m['hop']['produce_to_consume']['p50_ms']} ms")
    cf = r.get("cpu_floor")
    if cf:
        print(f"  CPU of those 7 tx + 6 hops at saturation (server and client): "
              f"{cf['cpu_ms_per_saga']} ms a saga; {r['machine']['cores']} cores doing nothing "
              f"else would sustain {cf['ceiling_sagas_per_s']} sagas/s")
    st = r.get("stack_state")
    if st:
        print(f"  database before the run: {st['catalogue_products']} products, "
              f"~{st['sagas_kept']} sagas kept, {st['database_mb']} MB (each run adds its own)")
    rel = r["relay"]
    print("\n== relay vs raw producer")
    print(f"  throughput: relay {rel['relay_events_per_s']}/s, raw {rel['raw_producer_events_per_s']}/s"
          f" ({rel['relay_share_of_raw']:.0%})")
    print(f"  commit → ack: p50 {rel['relay_commit_to_ack']['p50_ms']} ms, "
          f"p99 {rel['relay_commit_to_ack']['p99_ms']} ms (raw send → ack p50 "
          f"{rel['raw_send_to_ack']['p50_ms']} ms)")
    print("\n== open loop: request → terminal state")
    print(f"  {'rate/s':>7} {'done/s':>7} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8} "
          f"{'×floor':>6} {'×paced':>6} {'backlog':>7}  outcomes")
    for o in r["open_loop"]:
        lat = o["latency"]
        print(f"  {o['target_rate_per_s']:7g} {o['sustained_sagas_per_s']:7g} {ms(lat['p50_ms'])}"
              f" {ms(lat['p95_ms'])} {ms(lat['p99_ms'])} {ms(lat['max_ms'])} "
              f"{o['p50_multiple_of_floor']:6} {o['p50_multiple_of_paced_floor']:6} "
              f"{o['peak_outbox_backlog']:7}  {o['outcomes']}")
    first = r["open_loop"][0]
    print(f"\n== hops at {first['target_rate_per_s']:g}/s, p50 ms (from the producer's "
          f"{next(iter(first['hops'].values()))['from']})")
    for name, step in first["hops"].items():
        if "commit_to_ack_p50_ms" in step:
            print(f"  {name:40s} commit → ack {step['commit_to_ack_p50_ms']:6.2f}  "
                  f"ack → consumer {step['ack_to_consumer_p50_ms']:6.2f}  "
                  f"consumer tx {step.get('consumer_tx_p50_ms', '-')}")
        else:
            print(f"  {name}: p50 {step['p50_ms']}")
    c = r["contention"]
    print(f"\n== contention: {c['outcomes']}, p99 {c['latency']['p99_ms']} ms")
    burst_report.report(r)
    print("\n== closed loop (in order of clients; the search ran them as it chose)")
    for cl in sorted(r["closed_loop"], key=lambda cl: cl["concurrency"]):
        print(f"  {cl['concurrency']:3} clients: {cl['sagas_per_s']:7g} sagas/s, "
              f"p50 {cl['latency']['p50_ms']} ms, p99 {cl['latency']['p99_ms']} ms")
    print(f"\n  highest throughput with p99 < 1 s: "
          f"{r['max_sustained_sagas_per_s_p99_under_1s']} sagas/s")
    upkeep = r["idle"].get("waited_for_database_upkeep_s")
    vacuumed = r["idle"].get("tables_vacuumed")
    after = "" if upkeep is None else (
        f" (after {upkeep} s of the load's upkeep: "
        + (f"{len(vacuumed)} tables vacuumed and analysed, " if vacuumed is not None else "")
        + "a checkpoint)")
    print(f"\n== idle stack: {r['idle']['total_pct_of_core']} % of one core{after}")
    report_comparison(r)
    report_goals(r)


def _cell(x: Any, width: int) -> str:
    if not isinstance(x, int | float):
        return f"{'-':>{width}}"
    return f"{x:>{width}.{0 if abs(x) >= 1000 else 1}f}"


def ratio_rows(r: dict[str, Any]) -> list[tuple[str, dict[str, Any], float | None, float | None,
                                                 str]]:
    """Each figure of ``systems``: its label, every system's value, this ÷ the best peer
    shape, this ÷ the floor (where the floor has that figure) and the goal on the ratio."""
    systems = r.get("systems") or {}
    this = systems.get("this") or {}
    floor = r.get("floor") or {}
    floor_of = {"p50_ms_at_10": floor.get("p50_ms_paced"),
                "sagas_per_s_p99_under_1s": floor.get("sagas_per_s_ceiling"),
                "cpu_ms_per_saga_saturated": floor.get("cpu_ms_per_saga")}
    goal_of = {"p50_ms_at_10": f"≤ {goals.P50_VS_PEER:g}× peer, ≤ {goals.P50_VS_PACED_FLOOR:g}× "
                               "paced floor",
               "sagas_per_s_p99_under_1s": f"≥ {goals.THROUGHPUT_VS_PEER:g}× peer",
               "cpu_ms_per_saga_saturated": f"≤ {goals.CPU_VS_PEER:g}× peer"}
    rows = []
    for figure, (label, _) in goals.FIGURES.items():
        values = {name: m.get(figure) for name, m in systems.items()}
        to_floor = (this[figure] / floor_of[figure]
                    if this.get(figure) is not None and floor_of.get(figure) else None)
        rows.append((label, values, goals.ratio_to_peer(r, figure), to_floor,
                     goal_of.get(figure, "")))
    return rows


def report_comparison(r: dict[str, Any]) -> None:
    systems = r.get("systems") or {}
    if len(systems) < 2:
        print("\n== no peer measured (BENCH_PEERS empty)")
        return
    rounds = (r.get("comparison") or {}).get("rounds")
    print(f"\n== this stack against the same saga on DBOS ({rounds} round(s) of alternating "
          "blocks; each figure the median of a system's blocks)")
    names = list(systems)
    width = max(13, *(len(n) + 1 for n in names))
    print(f"  {'':28}" + "".join(f"{n:>{width}}" for n in names)
          + f"{'this÷best peer':>16}{'this÷floor':>12}  goal")
    for label, values, to_peer, to_floor, goal in ratio_rows(r):
        print(f"  {label:28}" + "".join(_cell(values.get(n), width) for n in names)
              + (f"{to_peer:>16.2f}" if to_peer is not None else f"{'-':>16}")
              + (f"{to_floor:>12.2f}" if to_floor is not None else f"{'-':>12}")
              + f"  {goal}")
    print("  (floor: p50 against the paced floor, throughput against the floor's CPU ceiling, "
          "CPU against the floor's CPU a saga)")


def report_goals(r: dict[str, Any]) -> None:
    print("\n== goals")
    for g in r["goals"]:
        verdict = "met" if g["met"] else f"MISSED by {g['missed_by']}"
        print(f"  {g['name']}: {g['measured']} — {verdict}")
    if "profile_at_latency_goal" in r:
        report_profile(r["profile_at_latency_goal"])
    report_profile(r.get("profile") or {})


def report_profile(p: dict[str, Any]) -> None:
    if "profile" not in p:
        print(f"\n== where the time goes: no profile ({p.get('error', 'not taken')})")
        return
    by_part = ", ".join(f"{k} {v:g}" for k, v in sorted(p["cpu_ms_per_saga_by_part"].items(),
                                                          key=lambda kv: -kv[1]))
    print(f"\n== where the time goes at {p['rate_per_s']:g}/s offered")
    print(f"  CPU per completed saga (ms): {by_part}; the load generator itself "
          f"{p.get('load_generator_cpu_ms_per_saga')} (same cores)")
    prof = p["profile"]
    waiting = prof.get("waiting_samples", 0)
    print(f"  {p['component']} (the hottest Python service), py-spy, {prof['samples']} samples"
          f" of running threads ({waiting} of waiting ones left out); innermost frame by package:")
    print("    " + ", ".join(f"{k} {v:.0%}" for k, v in prof["leaf_by_package"][:10]))
    if profile.SOCKET_WRITE in dict(prof["leaf_by_package"]):
        print(f"    ({profile.SOCKET_WRITE}: in write(2), mostly waiting for a core while the "
              "reader it woke runs; not this process's CPU)")
    print("  busiest lines:")
    for fn, share in prof["top_leaf_functions"][:8]:
        print(f"    {share:5.1%}  {fn}")
    st = p.get("postgres_statements")
    if st and "error" in st:
        print(f"  PostgreSQL's statements: not measured ({st['error']})")
    elif st:
        print(f"  PostgreSQL, the services' statements (pg_stat_statements): "
              f"{st['statements_ms_per_saga']} ms of execution a saga; the longest:")
        for s in st["top"][:8]:
            print(f"    {s['ms_per_saga']:6.3f} ms/saga  {s['calls_per_saga']:5.2f} calls × "
                  f"{s['ms_per_call']} ms  {s['statement'][:80]}")


def plot(r: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = [o["target_rate_per_s"] for o in r["open_loop"]]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label in (("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99")):
        ax.plot(rates, [o["latency"][key] for o in r["open_loop"]], marker="o", label=label)
    ax.axhline(r["floor_one_saga_ms"], color="grey", linestyle="--",
               label="floor (7 tx + 6 hops, back to back)")
    ax.axhline(r["floor_one_saga_paced_ms"], color="grey", linestyle=":",
               label="floor, each step after a pause")
    ax.set_xlabel("arrival rate (orders/s)")
    ax.set_ylabel("request → terminal state (ms)")
    ax.set_yscale("log")
    ax.set_title(f"Check-Then-Pay saga latency, {r['machine']['cores']} cores")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)

"""What `make bench` prints and plots of the burst contention scenario (``bench/burst.py``):
per ratio of units to orders and strategy, refunds per 100 orders (those lost to the race
apart), orders turned away, completed orders a second and p99; and each strategy's
throughput without contention against Check-Then-Pay's."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _f(x: Any, width: int, places: int = 1) -> str:
    return f"{x:>{width}.{places}f}" if isinstance(x, int | float) else f"{'-':>{width}}"


def table(burst: dict[str, Any]) -> list[str]:
    lines = [f"  {'units/orders':>12} {'strategy':<17} {'refunds':>8} {'race-lost':>9} "
             f"{'no stock':>8} {'declined':>8} {'completed':>9} {'done/s':>7} {'p99 ms':>8} "
             f"{'reserved':>8}"]
    for c in burst["cells"]:
        per = c["per_100_orders"]
        reserved = c.get("reserved_sagas")
        lines.append(
            f"  {c['ratio']:>12.2f} {c['strategy']:<17} {_f(per['refunds'], 8)} "
            f"{_f(per['refunds_race_lost'], 9)} {_f(per['no_stock'], 8)} "
            f"{_f(per['declined'], 8)} {_f(per['completed'], 9)} "
            f"{_f(c['completed_per_s'], 7)} {_f(c['p99_ms'], 8)} "
            f"{'-' if reserved is None else reserved:>8}")
    return lines


def no_contention_line(nc: dict[str, Any]) -> str:
    by = nc["by_strategy"]
    figures = ", ".join(f"{s} {m['sagas_per_s']:g} sagas/s (p99 {m['p99_ms']:g} ms)"
                        for s, m in by.items())
    shares = "; ".join(f"{s} ×{share:.2f} of check_then_pay"
                       for s, share in nc["share_of_check_then_pay"].items())
    verdict = {None: "", True: " — met", False: " — MISSED"}[nc["reserve_within_goal"]]
    goal = (f" (goal: reserve_then_pay ≥ ×{nc['goal_share']:.2f}{verdict})"
            if nc["reserve_within_goal"] is not None else "")
    return (f"  without contention (closed loop, {nc['clients']} clients, {nc['products']} "
            f"products a strategy): {figures}" + (f"\n  {shares}{goal}" if shares else ""))


def report(r: dict[str, Any]) -> None:
    burst = r.get("burst")
    if not burst:
        return
    print(f"\n== burst contention: {burst['orders_per_burst']} orders at once for a product "
          f"(1–3 units each, cards approved), {burst['rounds']} round(s); per 100 orders, "
          "\"race-lost\": charged, then no stock, refunded")
    for line in table(burst):
        print(line)
    print(no_contention_line(burst["no_contention"]))


def plot(r: dict[str, Any], path: Path) -> None:
    """Three panels against the ratio of units to orders, one line per strategy: refunds
    per 100 orders (solid: lost to the race; dotted: every refund), completed orders a
    second, and p99 request → terminal state."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    burst = r["burst"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for n, strategy in enumerate(burst["strategies"]):
        cells = sorted((c for c in burst["cells"] if c["strategy"] == strategy),
                       key=lambda c: c["ratio"])
        ratios = [c["ratio"] for c in cells]
        color = f"C{n}"
        axes[0].plot(ratios, [c["per_100_orders"]["refunds_race_lost"] for c in cells],
                     marker="o", color=color, label=f"{strategy}, lost to the race")
        axes[0].plot(ratios, [c["per_100_orders"]["refunds"] for c in cells], linestyle=":",
                     color=color, label=f"{strategy}, every refund")
        axes[1].plot(ratios, [c["completed_per_s"] for c in cells], marker="o", color=color,
                     label=strategy)
        axes[2].plot(ratios, [c["p99_ms"] for c in cells], marker="o", color=color,
                     label=strategy)
    for ax, label in zip(axes, ("refunds per 100 orders", "completed orders/s",
                                "p99 request → terminal (ms)"), strict=True):
        ax.set_xlabel("units / orders")
        ax.set_ylabel(label)
        ax.set_xscale("log")
        ax.set_xticks(burst["ratios"], [f"{x:g}" for x in burst["ratios"]])
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=7)
    fig.suptitle(f"Bursts of {burst['orders_per_burst']} orders at once, by allocation "
                 "strategy")
    fig.tight_layout()
    fig.savefig(path, dpi=110)

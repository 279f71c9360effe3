"""The benchmark's CPU accounting with real processes: a part's CPU between two samples counts
children that ran and exited in between, and does not lose the past of a child that exited
after the first sample (PostgreSQL's backends come and go with connections)."""

from __future__ import annotations

import subprocess
import sys

import psutil

from bench.common import cpu_seconds_between, sample_part

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def test_a_child_that_ran_and_exited_between_samples_is_counted() -> None:
    me = psutil.Process()
    before = sample_part(me)
    subprocess.run([sys.executable, "-c", BURN.format(s=0.3)], check=True)
    after = sample_part(me)
    assert cpu_seconds_between(before, after) >= 0.25


def test_a_child_that_worked_before_the_first_sample_and_exited_after_it_costs_nothing() -> None:
    me = psutil.Process()
    child = subprocess.Popen([sys.executable, "-c", BURN.format(s=0.4) + "input()\n"],
                             stdin=subprocess.PIPE, text=True)
    try:
        proc = psutil.Process(child.pid)
        while sum(proc.cpu_times()[:2]) < 0.35:  # its work, all before the first sample
            psutil.wait_procs([proc], timeout=0.05)
        own_before = sum(me.cpu_times()[:2])
        before = sample_part(me)
        assert any(pid == child.pid for pid, _ in before.cpu_s)
        child.communicate("\n", timeout=10)  # exits (and is reaped) between the samples
        after = sample_part(me)
        own = sum(me.cpu_times()[:2]) - own_before
    finally:
        child.kill()
    used = cpu_seconds_between(before, after)
    # Without the reaped-children term the child's past would come off the total (~0.4 s
    # below what the test process used); without taking its past off, ~0.4 s above it.
    assert after.reaped_s - before.reaped_s >= 0.35
    assert own - 0.02 <= used <= own + 0.15

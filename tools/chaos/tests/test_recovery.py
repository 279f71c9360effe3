"""The time to recover is read from the waits between a saga's steps around the fault."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from chaos.recovery import BOUND_S, Window, beyond_bound, measure, time_to_recover

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


FAULT = Window("pause pedidos@leader at 5.0s for 20.0s", "pedidos-2", at(10), at(30))


def test_waits_are_counted_from_the_fault_and_from_its_end() -> None:
    steps = {
        "done-before": [at(1), at(2), at(3)],
        # Its next step was due at 10.5 s; the takeover came 12 s after the fault.
        "taken-over": [at(9.5), at(22), at(22.3)],
        # Placed during the fault, moved on 4 s later.
        "placed-during": [at(15), at(19), at(19.2)],
        # Waited through the end of the fault: 3 s after it.
        "resumed": [at(29), at(33)],
        "after": [at(40), at(41)],
    }
    r = measure(FAULT, steps)
    assert (r.during_s, r.during_saga) == (12.0, "taken-over")
    assert (r.after_s, r.after_saga) == (3.0, "resumed")
    assert r.sagas == 3  # under way during the fault
    assert time_to_recover(r, survivors=True) == 12.0
    assert time_to_recover(r, survivors=False) == 3.0
    assert beyond_bound(r, survivors=True) is None


def test_a_saga_that_waited_through_the_whole_fault_breaks_the_bound_with_survivors() -> None:
    r = measure(FAULT, {"stalled": [at(9), at(31)]})
    assert r.during_s == 21.0 > BOUND_S
    violation = beyond_bound(r, survivors=True)
    assert violation is not None and violation.sagas == ("stalled",)
    # Alone, an instance cannot be taken over: only the 1 s after the end counts.
    assert beyond_bound(r, survivors=False) is None

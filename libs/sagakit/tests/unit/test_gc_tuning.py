"""The collector settings a started service runs with (sagakit.runtime.gc_tuning)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from sagakit.runtime.gc_tuning import settle_heap


@pytest.fixture
def collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class _Built:
    """Something a service builds to start, part of a reference cycle as such objects are."""

    def __init__(self) -> None:
        self.me = self


def test_what_the_service_built_to_start_is_out_of_the_collectors_reach(collector: None) -> None:
    built = _Built()
    gc.collect()
    assert gc.is_tracked(built) and gc.get_freeze_count() == 0
    settle_heap(10_000)
    assert gc.get_freeze_count() > 0
    # A full collection walks every generation but the permanent one: what was frozen is no
    # longer among the objects the collector looks at.
    assert not any(o is built for o in gc.get_objects())
    assert gc.get_threshold()[0] == 10_000


def test_the_youngest_generation_is_collected_less_often(collector: None) -> None:
    settle_heap(10_000)
    gc.collect()
    before = gc.get_stats()[0]["collections"]
    garbage = [[i] for i in range(5_000)]  # container allocations, more than CPython's 700
    del garbage
    assert gc.get_stats()[0]["collections"] == before


def test_zero_leaves_the_collector_as_cpython_sets_it(collector: None) -> None:
    thresholds = gc.get_threshold()
    settle_heap(0)
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == thresholds

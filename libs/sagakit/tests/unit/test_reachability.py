"""When ``Reachability`` counts the database lost: only after answers have stopped for the
whole ``lost_after_s``, not at the first probe that failed; and found again at the first answer.
The probe itself, against a real database behind a black hole, is in
tests/integration/test_database_reachability.py."""

from __future__ import annotations

from sagakit.store.reachability import Reachability


def _watch() -> Reachability:
    watch = Reachability("postgresql+asyncpg://127.0.0.1:1/db", "unittest", lost_after_s=5.0)
    watch._record(True, 100.0)
    return watch


def test_failed_probes_shorter_than_the_bound_lose_nothing() -> None:
    watch = _watch()
    for now in (101.0, 102.5, 104.9):
        watch._record(False, now)
        assert not watch.lost.is_set() and watch.regained.is_set()


def test_silence_for_the_bound_loses_the_database_and_an_answer_regains_it() -> None:
    watch = _watch()
    watch._record(False, 103.0)
    watch._record(False, 105.0)
    assert watch.lost.is_set() and not watch.regained.is_set()
    watch._record(True, 106.0)
    assert not watch.lost.is_set() and watch.regained.is_set()


def test_one_answer_in_between_starts_the_silence_again() -> None:
    watch = _watch()
    watch._record(False, 104.0)
    watch._record(True, 104.5)
    watch._record(False, 109.0)
    assert not watch.lost.is_set()
    watch._record(False, 109.5)
    assert watch.lost.is_set()

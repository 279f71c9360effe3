"""The pieces of ``make backup``/``make restore`` that need no running PostgreSQL: the archive
command as the shell runs it, what a base backup copies of a data directory, which base backup
a target time restores from, and what pruning keeps (tests/e2e/test_point_in_time_recovery.py
runs the whole drill against the real stack)."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from local_stack.postgres import backup

SEGMENT = "000000010000000000000003"


@pytest.fixture
def backups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "backup"
    monkeypatch.setattr(backup, "backup_dir", lambda: folder)
    return folder


def _archive(wal: Path, source: Path) -> int:
    command = backup.archive_command(wal).replace("%p", str(source)).replace("%f", source.name)
    return subprocess.run(["sh", "-c", command]).returncode


def test_the_archive_command_copies_only_once_there_is_an_archive(tmp_path: Path) -> None:
    segment = tmp_path / "pg_wal" / SEGMENT
    segment.parent.mkdir()
    segment.write_bytes(b"wal" * 100)
    wal = tmp_path / "archive"
    # No base backup yet: success without a copy, so that PostgreSQL recycles the segment.
    assert _archive(wal, segment) == 0 and not wal.exists()
    wal.mkdir()
    assert _archive(wal, segment) == 0
    assert (wal / SEGMENT).read_bytes() == segment.read_bytes()
    assert not list(wal.glob("*.part"))
    # Archived again (a retry after a crash): the same file is fine, another one is an error.
    assert _archive(wal, segment) == 0
    segment.write_bytes(b"other")
    assert _archive(wal, segment) != 0
    assert (wal / SEGMENT).read_bytes() == b"wal" * 100


def test_a_path_the_archive_command_cannot_carry_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="characters"):
        backup.archive_command(tmp_path / "it's here")


def test_a_base_backup_copies_the_data_but_not_what_recovery_rebuilds(tmp_path: Path) -> None:
    data = tmp_path / "pg"
    for name in ("PG_VERSION", "postgresql.conf", "postmaster.pid", "postmaster.opts",
                 "base/1/1259", "global/pg_control", f"pg_wal/{SEGMENT}",
                 "pg_wal/archive_status/x.ready", "pg_stat_tmp/global.stat",
                 "base/pgsql_tmp/pgsql_tmp1.0", "pg_replslot/s/state", ".s.PGSQL.25432.lock"):
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text(name)
    copy = tmp_path / "copy"
    backup.copy_data_dir(data, copy)
    kept = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file())
    assert kept == ["PG_VERSION", "base/1/1259", "global/pg_control", "postgresql.conf"]
    # The folders stay, empty: PostgreSQL expects them.
    assert (copy / "pg_wal" / "archive_status").is_dir() and (copy / "pg_stat_tmp").is_dir()


def _made(backups: Path, label: str, at: datetime, first_wal: str) -> None:
    folder = backups / "base" / label
    (folder / "data").mkdir(parents=True)
    (folder / "backup.json").write_text(json.dumps(
        {"label": label, "consistent_at": at.isoformat(), "first_wal": first_wal}))


def test_a_restore_starts_from_the_newest_backup_before_the_target(backups: Path) -> None:
    t = datetime(2026, 12, 6, 5, 0, tzinfo=UTC)
    _made(backups, "a", t, "000000010000000000000002")
    _made(backups, "b", t + timedelta(hours=1), "000000010000000000000008")
    assert backup.choose_base(None).label == "b"
    assert backup.choose_base(t + timedelta(minutes=30)).label == "a"
    with pytest.raises(SystemExit, match="no base backup is older"):
        backup.choose_base(t - timedelta(seconds=1))


def test_no_backup_says_how_to_make_one(backups: Path) -> None:
    with pytest.raises(SystemExit, match="make backup"):
        backup.choose_base(None)


def test_pruning_keeps_the_newest_backups_and_the_wal_they_need(
        backups: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backup, "KEEP_BASE_BACKUPS", 2)
    t = datetime(2026, 12, 6, 5, 0, tzinfo=UTC)
    for i, label in enumerate("abc"):
        _made(backups, label, t + timedelta(hours=i), f"0000000100000000000000{2 + 3 * i:02X}")
    wal = backups / "wal"
    wal.mkdir()
    names = [f"0000000{tl}0000000000000{n:03X}" for tl, n in
             ((1, 3), (1, 4), (1, 5), (1, 6), (2, 7))] + ["00000002.history"]
    for name in names:
        (wal / name).write_text("")
    backup.prune()
    assert sorted(p.name for p in (backups / "base").iterdir()) == ["b", "c"]
    # b needs its WAL from segment 5 on, whatever the timeline; history files stay.
    assert sorted(p.name for p in wal.iterdir()) == sorted(names[2:])


def test_the_target_time_is_utc_unless_it_says(tmp_path: Path) -> None:
    assert backup.parse_target(None) is None and backup.parse_target("latest") is None
    assert backup.parse_target("2026-12-06T05:10:00") == datetime(2026, 12, 6, 5, 10, tzinfo=UTC)
    assert backup.parse_target("2026-12-06T06:10:00+01:00") == datetime(
        2026, 12, 6, 5, 10, tzinfo=UTC)
    with pytest.raises(SystemExit, match="ISO 8601"):
        backup.parse_target("yesterday")

"""Base backups of the stack's PostgreSQL, continuous WAL archiving, and recovery to a point in
time (``make backup``, ``make restore``; docs/operations.md, "Backups and point-in-time
recovery").

Only the server's own programs are needed (``postgres``, ``pg_ctl``): a base backup is
PostgreSQL's low-level API over SQL (``pg_backup_start`` → a copy of the data directory →
``pg_backup_stop``, whose backup label is written into the copy), and the archive is a folder
that ``archive_command`` copies each finished WAL segment into. Everything lives beside the
cluster's data (``.local/backup``)::

    backup/base/<label>/data          the copy, with its backup_label
    backup/base/<label>/backup.json   when it became consistent, its label, its first WAL file
    backup/wal/                       the archive

Archiving runs from the first ``backup`` on: until ``backup/wal`` exists the archive command
succeeds without copying (WAL older than every base backup restores nothing).

A restore recovers a copy of a base backup in a folder of its own, replaying the archive and
what the crashed cluster had not archived yet up to the target time, and only once PostgreSQL
has finished that recovery does the copy replace the stack's data directory; the one it
replaces is moved aside (``pg.replaced-<time>``), never deleted. Then the saga is made whole
again (``consistency``): Kafka's history past the restored database is skipped and what the
database had published lately is published again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from local_stack.console import log
from local_stack.passwords import admin_password
from local_stack.postgres.crash import clear_crashed_cluster, running_postmaster
from local_stack.postgres.data_dir import pg_data_dir
from local_stack.postgres.programs import as_pg_user, pg_bin, pg_os_user
from local_stack.settings import BACKUP_KEEP, PG_ADMIN, PG_PORT, RESTORE_TIMEOUT_S

# Base backups kept; older ones go with the archived WAL only they needed.
KEEP_BASE_BACKUPS = BACKUP_KEEP
# How long PostgreSQL may take to replay the archive up to the target.
RECOVERY_DEADLINE_S = RESTORE_TIMEOUT_S
# The file of the data directory that holds the archiving settings, and the one that holds a
# recovery's while it runs; postgresql.conf includes both when present.
ARCHIVING_CONF = "archiving.conf"
RECOVERY_CONF = "recovery_target.conf"
# What a WAL segment's file is called (timeline, log, segment).
WAL_FILE = re.compile(r"[0-9A-F]{24}")
# What the low-level API says a base backup leaves out of the copy (PostgreSQL's manual,
# "Making a Base Backup Using the Low Level API"): rebuilt or useless at recovery.
SKIPPED_CONTENTS = {"pg_wal", "pg_replslot", "pg_dynshmem", "pg_notify", "pg_serial",
                    "pg_snapshots", "pg_stat_tmp", "pg_subtrans"}
SKIPPED_FILES = {"postmaster.pid", "postmaster.opts", "backup_label.old", "pg_internal.init",
                 RECOVERY_CONF, "recovery.signal", "standby.signal"}


def backup_dir() -> Path:
    return pg_data_dir().parent / "backup"


def archive_dir() -> Path:
    return backup_dir() / "wal"


def _safe(path: Path) -> str:
    """A path as it goes into a shell command in postgresql.conf: refused if it would need
    quoting there."""
    text = str(path)
    if not re.fullmatch(r"[A-Za-z0-9_./+-]+", text):
        raise SystemExit(f"[stack] the backup folder {text} has characters the archive "
                         "command cannot carry: set SAGA_STATE_DIR to a plainer path")
    return text


def archive_command(wal: Path) -> str:
    """Copies a finished segment into ``wal`` (through a temporary name, so that a crash never
    leaves half a segment under its real name); a segment archived already succeeds if it is
    the same, and fails loudly if it is not. Succeeds without copying while ``wal`` does not
    exist: there is no base backup to replay it onto."""
    w = _safe(wal)
    return (f"if [ ! -d {w} ]; then exit 0; fi; if [ -f {w}/%f ]; then cmp -s %p {w}/%f; "
            f"else cp %p {w}/%f.part && mv {w}/%f.part {w}/%f; fi")


def restore_command(wal: Path) -> str:
    w = _safe(wal)
    return f"cp {w}/%f %p"


def configure_archiving(data: Path) -> None:
    """Turns continuous archiving on for the next start of the cluster in ``data``: written on
    every start (the archive's folder follows the stack's), included by postgresql.conf."""
    settings = (f"# saga local stack: continuous WAL archiving (local_stack.postgres.backup)\n"
                f"archive_mode = on\narchive_command = '{archive_command(archive_dir())}'\n")
    _write_as_cluster_file(data / ARCHIVING_CONF, settings)
    _include(data, ARCHIVING_CONF)
    _include(data, RECOVERY_CONF)


def _include(data: Path, name: str) -> None:
    conf = data / "postgresql.conf"
    line = f"include_if_exists = '{name}'"
    text = conf.read_text()
    if line not in text.splitlines():
        conf.write_text(f"{text.rstrip()}\n{line}\n")


def _write_as_cluster_file(path: Path, text: str) -> None:
    path.write_text(text)
    owner = _owner()
    if owner is not None:
        os.chown(path, *owner)
    os.chmod(path, 0o600)


def _owner() -> tuple[int, int] | None:
    user = pg_os_user()
    if user is None:
        return None
    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def _chown_tree(root: Path) -> None:
    owner = _owner()
    if owner is None:
        return
    os.chown(root, *owner)
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.lchown(Path(folder) / name, *owner)


# ---------------------------------------------------------------------------------------------
# backup


@dataclass(frozen=True)
class BaseBackup:
    folder: Path
    label: str
    consistent_at: datetime
    """The database's clock once ``pg_backup_stop`` returned: the earliest restorable time."""
    first_wal: str
    """The first WAL file the backup needs; archived files before it serve only older bases."""

    @property
    def data(self) -> Path:
        return self.folder / "data"


def base_backups() -> list[BaseBackup]:
    """The complete base backups, oldest first (one whose copy failed has no backup.json)."""
    found = []
    for meta in sorted((backup_dir() / "base").glob("*/backup.json")):
        d = json.loads(meta.read_text())
        found.append(BaseBackup(meta.parent, d["label"],
                                datetime.fromisoformat(d["consistent_at"]), d["first_wal"]))
    return sorted(found, key=lambda b: b.consistent_at)


async def connect_admin(database: str = "postgres") -> asyncpg.Connection:
    return await asyncpg.connect(host="127.0.0.1", port=PG_PORT, user=PG_ADMIN,
                                 password=admin_password(), database=database)


def backup() -> BaseBackup:
    """A base backup of the running cluster, then the archive trimmed to the kept backups."""
    return asyncio.run(_backup())


async def _backup() -> BaseBackup:
    data = pg_data_dir()
    if running_postmaster(data) is None:
        raise SystemExit("[stack] PostgreSQL is not running: `make up` first")
    conn = await connect_admin()
    try:
        if await conn.fetchval("SHOW archive_mode") != "on":
            raise SystemExit("[stack] this PostgreSQL was started without WAL archiving: "
                             "`make down` then `make up` turns it on, then `make backup`")
        wal = archive_dir()
        if not wal.exists():
            wal.mkdir(parents=True)
            _chown_tree(wal)
            log(f"continuous WAL archiving into {wal} starts now")
        started = time.monotonic()
        label = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        folder = backup_dir() / "base" / label
        folder.mkdir(parents=True)
        log(f"base backup {label}: copying {data}")
        await conn.execute("SELECT pg_backup_start($1, fast => true)", label)
        try:
            await asyncio.to_thread(copy_data_dir, data, folder / "data")
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.execute("SELECT pg_backup_stop(wait_for_archive => false)")
            raise
        # Waits until the last WAL segment the backup needs is in the archive.
        stop = await conn.fetchrow("SELECT labelfile, spcmapfile "
                                   "FROM pg_backup_stop(wait_for_archive => true)")
        consistent_at = await conn.fetchval("SELECT clock_timestamp()")
    finally:
        await conn.close()
    (folder / "data" / "backup_label").write_text(stop["labelfile"])
    if stop["spcmapfile"]:
        (folder / "data" / "tablespace_map").write_text(stop["spcmapfile"])
    first_wal = re.search(r"\(file ([0-9A-F]{24})\)", stop["labelfile"])
    if first_wal is None:
        raise SystemExit(f"[stack] unexpected backup label:\n{stop['labelfile']}")
    made = BaseBackup(folder, label, consistent_at, first_wal.group(1))
    (folder / "backup.json").write_text(json.dumps({
        "label": label, "consistent_at": consistent_at.isoformat(),
        "first_wal": made.first_wal, "pg_version": (data / "PG_VERSION").read_text().strip(),
    }, indent=2) + "\n")
    log(f"base backup {label} done in {time.monotonic() - started:.1f}s; restorable to any "
        f"time from {consistent_at.isoformat()} on")
    prune()
    return made


def copy_data_dir(source: Path, target: Path) -> None:
    """The data directory as the low-level API asks for it: files that vanish while it is
    copied are skipped (PostgreSQL's WAL replay makes them again or drops them)."""
    for folder, dirs, files in os.walk(source):
        here = Path(folder)
        rel = here.relative_to(source)
        (target / rel).mkdir(parents=True, exist_ok=True)
        if (rel.parts and rel.parts[0] in SKIPPED_CONTENTS) or here.name == "pgsql_tmp":
            dirs[:] = []
            if rel.parts[0] == "pg_wal":
                (target / rel / "archive_status").mkdir(exist_ok=True)
            continue
        for name in files:
            if name in SKIPPED_FILES or name.startswith(".s.PGSQL."):
                continue
            with contextlib.suppress(FileNotFoundError):
                shutil.copy2(here / name, target / rel / name, follow_symlinks=False)
    os.chmod(target, 0o700)


def prune() -> None:
    """Keeps the newest KEEP_BASE_BACKUPS base backups and the archived WAL they need; says
    what it removes."""
    bases = base_backups()
    for old in bases[:-KEEP_BASE_BACKUPS]:
        log(f"removing base backup {old.label} (keeping the newest {KEEP_BASE_BACKUPS})")
        shutil.rmtree(old.folder)
    kept = bases[-KEEP_BASE_BACKUPS:]
    if not kept:
        return
    # As pg_archivecleanup compares: by log and segment, whatever the timeline; the timelines'
    # history files are kept.
    oldest = min(b.first_wal[8:] for b in kept)
    removed = 0
    for f in archive_dir().iterdir():
        if WAL_FILE.fullmatch(f.name[:24]) and not f.name.endswith(".history") \
                and f.name[8:24] < oldest:
            f.unlink()
            removed += 1
    if removed:
        log(f"removed {removed} archived WAL file(s) older than the oldest kept base backup")


# ---------------------------------------------------------------------------------------------
# restore


def parse_target(text: str | None) -> datetime | None:
    """``RESTORE_TARGET_TIME``: an ISO 8601 time, UTC unless it says its offset; none is the
    latest the archive and the cluster's own WAL reach."""
    if not text or text == "latest":
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise SystemExit(f"[stack] RESTORE_TARGET_TIME={text!r} is not an ISO 8601 time "
                         "(e.g. 2026-12-06T05:10:00Z)") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def choose_base(target: datetime | None) -> BaseBackup:
    bases = base_backups()
    if not bases:
        raise SystemExit(f"[stack] no base backup in {backup_dir()}: `make backup` makes one")
    usable = [b for b in bases if target is None or b.consistent_at <= target]
    if not usable:
        raise SystemExit(f"[stack] no base backup is older than {target.isoformat() if target else ''}"
                         f": the oldest kept one is consistent from "
                         f"{bases[0].consistent_at.isoformat()} on")
    return usable[-1]


def recover_copy(base: BaseBackup, target: datetime | None, crashed: Path) -> Path:
    """A copy of ``base`` recovered up to ``target`` (the latest WAL there is when None) in a
    folder beside ``crashed``, the cluster it will replace (stopped): its WAL not archived yet
    is copied in too, as the manual's recovery procedure says. Answers the folder, promoted
    and stopped cleanly."""
    stage = crashed.parent / "pg.restoring"
    if stage.exists():
        log(f"removing {stage}, left by a restore that did not finish")
        shutil.rmtree(stage)
    log(f"restoring base backup {base.label} into {stage}")
    shutil.copytree(base.data, stage, symlinks=True)
    unarchived = 0
    with contextlib.suppress(FileNotFoundError):
        for f in (crashed / "pg_wal").iterdir():
            if WAL_FILE.fullmatch(f.name) and f.is_file():
                shutil.copy2(f, stage / "pg_wal" / f.name)
                unarchived += 1
    lines = [f"restore_command = '{restore_command(archive_dir())}'",
             "recovery_target_timeline = 'latest'",
             "recovery_target_action = 'promote'"]
    if target is not None:
        lines.append(f"recovery_target_time = '{target.isoformat()}'")
    (stage / RECOVERY_CONF).write_text("\n".join(lines) + "\n")
    (stage / "recovery.signal").write_text("")
    _include(stage, ARCHIVING_CONF)
    _include(stage, RECOVERY_CONF)
    _chown_tree(stage)
    os.chmod(stage, 0o700)
    log(f"replaying WAL up to {target.isoformat() if target else 'the latest there is'} "
        f"({unarchived} segment(s) of the crashed cluster's pg_wal copied in)")
    pg_log = crashed.parent / "postgres.log"
    logged_before = pg_log.stat().st_size if pg_log.exists() else 0
    started = time.monotonic()
    res = subprocess.run(as_pg_user([pg_bin("pg_ctl"), "-D", str(stage), "-l", str(pg_log),
                                     "-w", "-t", str(int(RECOVERY_DEADLINE_S)),
                                     "-o", f"-c port={PG_PORT}", "start"]),
                         capture_output=True, text=True)
    try:
        deadline = time.monotonic() + RECOVERY_DEADLINE_S
        # recovery.signal goes when recovery ends and the cluster is promoted.
        while res.returncode == 0 and (stage / "recovery.signal").exists():
            if running_postmaster(stage) is None or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if res.returncode != 0 or (stage / "recovery.signal").exists():
            with pg_log.open("rb") as log_file:
                log_file.seek(logged_before)
                said = log_file.read().decode(errors="replace")[-3000:]
            raise SystemExit(f"[stack] recovery did not finish; the stack's data directory "
                             f"{crashed} is untouched, the attempt is in {stage}:\n"
                             f"{res.stdout.strip()} {res.stderr.strip()}\n{said}")
    finally:
        subprocess.run(as_pg_user([pg_bin("pg_ctl"), "-D", str(stage), "-m", "fast", "-w",
                                   "stop"]), capture_output=True)
    (stage / RECOVERY_CONF).unlink()
    log(f"recovery done in {time.monotonic() - started:.1f}s")
    return stage


def replace_data_dir(stage: Path, data: Path) -> Path:
    """``stage`` becomes the stack's data directory; the one it replaces is moved aside."""
    aside = data.parent / f"pg.replaced-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    data.rename(aside)
    stage.rename(data)
    log(f"the data directory before the restore is kept in {aside} (remove it once the "
        "restore is checked)")
    return aside


def restore_cluster(target: datetime | None) -> tuple[BaseBackup, Path]:
    """The cluster (stopped or crashed) replaced by ``target``'s recovery; not started."""
    base = choose_base(target)
    data = pg_data_dir()
    if running_postmaster(data) is not None:
        log("stopping PostgreSQL for the restore")
        subprocess.run(as_pg_user([pg_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w",
                                   "stop"]), capture_output=True)
    clear_crashed_cluster(data)
    stage = recover_copy(base, target, data)
    return base, replace_data_dir(stage, data)

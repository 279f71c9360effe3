"""Where the cluster's data lives, chosen once per state dir."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from local_stack.postgres.os_user import pg_os_user
from local_stack.settings import ROOT, STATE


def pg_data_dir() -> Path:
    """The cluster's folder: under the state dir when the postgres user can reach it.

    The choice is made once and remembered in the state dir, so that ``down`` always finds the
    cluster that ``up`` started.
    """
    STATE.mkdir(parents=True, exist_ok=True)
    remembered = STATE / "pg.location"
    if remembered.exists():
        return Path(remembered.read_text().strip())
    chosen = STATE / "pg"
    user = pg_os_user()
    if user is not None:
        probe = subprocess.run(["runuser", "-u", user, "--", "test", "-x", str(STATE)],
                               capture_output=True)
        if probe.returncode != 0:
            # The checkout lives where the postgres user cannot go (a private temp dir):
            # keep the cluster in a folder of its own, named after the checkout.
            tag = hashlib.sha1(str(ROOT).encode()).hexdigest()[:10]
            chosen = Path(f"/var/tmp/saga-choreography-{tag}/pg")
    remembered.write_text(str(chosen))
    return chosen


def server_folder() -> Path:
    """Where PostgreSQL's server programs of the pinned version are unpacked: beside the
    cluster's folder, where the postgres user can reach them too."""
    from local_stack.postgres.binaries import POSTGRES_VERSION

    return pg_data_dir().parent / f"postgresql-{POSTGRES_VERSION}"

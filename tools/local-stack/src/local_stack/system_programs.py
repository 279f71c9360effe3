"""The programs from Debian's packages that a part of the project runs. Each part names its own
(``LOCAL_STACK`` here, ``compose_stack.engine.PROGRAMS``) and ``require`` stops it before it
starts when one is missing, naming the program, its package and the command that installs it,
rather than letting a program fail half-way (netavark without iptables fails every container
with a bare "No such file or directory"). deploy/local/programs.txt is the table bootstrap.sh
installs from; a test holds it to what the parts name."""

from __future__ import annotations

import glob
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).resolve().parents[4] / "deploy" / "local" / "programs.txt"
# What installs each need's programs (bootstrap.sh's arguments, through the Makefile).
BOOTSTRAP = {"base": "make bootstrap-local", "local": "make bootstrap-local",
             "compose": "make bootstrap-compose", "test": "make bootstrap"}
# What the local stack runs (the PostgreSQL cluster as its own user, its server and Kafka's jars
# from Maven, Kafka on Java, PostgreSQL's clients).
LOCAL_STACK = ("psql", "pg_isready", "java", "mvn", "runuser")


@dataclass(frozen=True)
class Program:
    need: str
    name: str
    package: str


def present(name: str) -> bool:
    """A command on PATH, an absolute path (a glob), or ``python3:MODULE``."""
    if name.startswith("python3:"):
        module = name.removeprefix("python3:")
        return subprocess.run(["python3", "-c", f"import {module}"],
                              capture_output=True).returncode == 0
    if name.startswith("/"):
        return bool(glob.glob(name))
    return shutil.which(name) is not None


def programs(table: Path = TABLE) -> list[Program]:
    rows = []
    for line in table.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        need, name, package = line.split()
        rows.append(Program(need, name, package))
    return rows


def require(names: Sequence[str], table: Path = TABLE) -> None:
    """Ends the process, naming every one of ``names`` that is missing and how to install it."""
    absent = [name for name in names if not present(name)]
    if not absent:
        return
    rows = {p.name: p for p in programs(table)}
    known = [rows[name] for name in absent if name in rows]
    unknown = [name for name in absent if name not in rows]
    parts = [f"{p.name} (Debian's {p.package})" for p in known]
    parts += [f"{name} (which deploy/local/programs.txt does not list: no bootstrap installs it)"
              for name in unknown]
    message = "missing: " + ", ".join(parts) + "."
    if known:
        commands = " or ".join(dict.fromkeys(BOOTSTRAP[p.need] for p in known))
        packages = " ".join(dict.fromkeys(p.package for p in known))
        message += (f" {commands} installs them "
                    f"(apt-get install --no-install-recommends {packages}).")
    raise SystemExit(message)

"""The programs from Debian's packages that a part of the project runs (deploy/local/programs.txt,
the table deploy/local/bootstrap.sh installs from): ``require`` names the missing ones, with the
command that installs them, before the part starts rather than when a program fails half-way
(netavark without iptables fails every container with a bare "No such file or directory")."""

from __future__ import annotations

import glob
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).resolve().parents[4] / "deploy" / "local" / "programs.txt"
# What `make bootstrap-<need>` installs for each need (bootstrap.sh's arguments).
BOOTSTRAP = {"base": "make bootstrap-local", "local": "make bootstrap-local",
             "compose": "make bootstrap-compose", "test": "make bootstrap"}


@dataclass(frozen=True)
class Program:
    need: str
    name: str
    package: str

    def present(self) -> bool:
        if self.name.startswith("python3:"):
            module = self.name.removeprefix("python3:")
            return subprocess.run(["python3", "-c", f"import {module}"],
                                  capture_output=True).returncode == 0
        if self.name.startswith("/"):
            return bool(glob.glob(self.name))
        return shutil.which(self.name) is not None


def programs(table: Path = TABLE) -> list[Program]:
    rows = []
    for line in table.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        need, name, package = line.split()
        rows.append(Program(need, name, package))
    return rows


def missing(need: str, table: Path = TABLE) -> list[Program]:
    return [p for p in programs(table) if p.need == need and not p.present()]


def require(need: str, table: Path = TABLE) -> None:
    """Ends the process, naming every missing program of ``need`` and how to install it."""
    absent = missing(need, table)
    if absent:
        names = ", ".join(f"{p.name} (Debian's {p.package})" for p in absent)
        packages = " ".join(dict.fromkeys(p.package for p in absent))
        raise SystemExit(f"missing: {names}. {BOOTSTRAP[need]} installs them "
                         f"(apt-get install --no-install-recommends {packages}).")

"""The table of the programs the project runs (deploy/local/programs.txt): what ``require`` says
when one is missing, and that bootstrap.sh, the Makefile and the README agree with it."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from compose_stack import engine
from local_stack.system_programs import BOOTSTRAP, LOCAL_STACK, TABLE, present, programs, require

ROOT = TABLE.parents[2]


def _table(tmp_path: Path, rows: str) -> Path:
    path = tmp_path / "programs.txt"
    path.write_text("# need program package\n" + rows)
    return path


def test_require_names_each_missing_program_its_package_and_the_command(tmp_path: Path) -> None:
    table = _table(tmp_path, "compose sh dash\n"
                             "compose no-such-program-here iptables\n"
                             "compose /no/such/dir/*/netavark netavark\n"
                             "local no-such-local-program postgresql\n")
    with pytest.raises(SystemExit) as ended:
        require(["sh", "no-such-program-here", "/no/such/dir/*/netavark"], table)
    message = str(ended.value)
    assert "no-such-program-here (Debian's iptables)" in message
    assert "/no/such/dir/*/netavark (Debian's netavark)" in message
    assert "make bootstrap-compose" in message
    assert "apt-get install --no-install-recommends iptables netavark" in message
    # A program not asked for and a present one are not named.
    assert "no-such-local-program" not in message and "dash" not in message


def test_a_program_the_table_lacks_is_named_as_one_no_bootstrap_installs(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as ended:
        require(["sh", "iptables-not-listed"], _table(tmp_path, "compose sh dash\n"))
    assert "iptables-not-listed (which deploy/local/programs.txt does not list" in str(ended.value)


def test_require_passes_when_every_program_is_there(tmp_path: Path) -> None:
    require(["sh", "python3:json"], _table(tmp_path, "local sh dash\n"))


def test_a_program_may_be_a_command_a_path_glob_or_a_python_module() -> None:
    assert present("sh")
    assert present("/bin/s*")
    assert present("python3:json")
    assert not present("python3:no_such_module_here")
    assert not present("/no/such/path/*")


def test_every_program_a_part_runs_is_in_the_table_under_its_need() -> None:
    """What bootstrap installs covers what the local stack and the compose stack run: a program
    dropped from the table (iptables, say) fails here as well as on a new machine."""
    rows = {p.name: p.need for p in programs()}
    for name in LOCAL_STACK:
        assert rows.get(name) == "local", f"{name} is not installed for the local stack"
    for name in engine.PROGRAMS:
        assert rows.get(name) == "compose", f"{name} is not installed for the compose stack"


def test_the_table_names_only_needs_bootstrap_knows() -> None:
    rows = programs()
    assert rows, TABLE
    assert {p.need for p in rows} <= set(BOOTSTRAP)
    bootstrap = (ROOT / "deploy/local/bootstrap.sh").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for need, command in BOOTSTRAP.items():
        target = command.removeprefix("make ")
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), command
        if need != "base":
            assert f"{need})" in bootstrap, f"bootstrap.sh does not take {need}"


def test_bootstrap_reports_a_missing_program_by_name_without_root() -> None:
    """bootstrap.sh, run by someone who is not root, names what it would install and stops."""
    table = (ROOT / "deploy/local/programs.txt").read_text()
    # A folder the unprivileged user can read (pytest's own are the owner's alone).
    with tempfile.TemporaryDirectory(prefix="saga-bootstrap-") as tmp:
        os.chmod(tmp, 0o755)
        _bootstrap_as_nobody(Path(tmp), table)


def _bootstrap_as_nobody(tmp_path: Path, table: str) -> None:
    fake_root = tmp_path / "checkout"
    (fake_root / "deploy/local").mkdir(parents=True)
    (fake_root / "deploy/local/programs.txt").write_text(
        table + "compose no-such-program-for-the-test iptables\n")
    script = fake_root / "deploy/local/bootstrap.sh"
    script.write_text((ROOT / "deploy/local/bootstrap.sh").read_text())
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           "bash", str(script), "compose"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no-such-program-for-the-test" in done.stdout
    assert "apt-get install --no-install-recommends" in done.stdout and "iptables" in done.stdout


def test_the_readme_lists_the_prerequisites_fresh_root_installs() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("<!-- prerequisites -->")[1].split("<!-- /prerequisites -->")[0]
    line = re.search(r"apt-get install ([^`\n]*)", section)
    assert line, "the prerequisites name no apt-get install line"
    packages = line.group(1).split()
    for needed in ("make", "git", "python3", "ca-certificates", "curl", "jq"):
        assert needed in packages

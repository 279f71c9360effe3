"""Each service's migrations form one line: one head, each revision once. Two branches that
each add "the next" revision merge without a conflict in git and only fail when Alembic is
asked for ``head`` (every service's start)."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("pedidos", "inventario", "pagos")


@pytest.mark.parametrize("service", SERVICES)
def test_the_migrations_have_one_head_and_no_repeated_revision(service: str) -> None:
    config = Config(str(ROOT / "services" / service / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "services" / service / "migrations"))
    script = ScriptDirectory.from_config(config)
    assert len(script.get_heads()) == 1, script.get_heads()
    revisions = list(script.walk_revisions())
    assert len({r.revision for r in revisions}) == len(revisions)
    files = list((ROOT / "services" / service / "migrations" / "versions").glob("*.py"))
    assert len(files) == len(revisions), "a revision id is used by two files"

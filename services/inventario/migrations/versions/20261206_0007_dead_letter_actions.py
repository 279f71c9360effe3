"""inventario: what operators did to its dead letters, and the dead letters' published view

An append-only `dead_letter_actions` (replayed, archived, forged: who, when, why) and
`inventario_read.dead_letters_v1`, each letter with its state and last action, granted to
`inventario_reader` (sagakit.operations.dead_letter_actions).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""
from collections.abc import Sequence

from alembic import op

from sagakit.operations.dead_letter_actions import (
    create_dead_letter_actions_v1,
    drop_dead_letter_actions_v1,
)

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "inventario"


def upgrade() -> None:
    create_dead_letter_actions_v1(op, SCHEMA)


def downgrade() -> None:
    drop_dead_letter_actions_v1(op, SCHEMA)

"""inventario: partial indexes for the outbox and dead-letter gauges

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""
from collections.abc import Sequence

from alembic import op

from sagakit.store.migrations import create_messaging_indexes_v2, drop_messaging_indexes_v2

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "inventario"


def upgrade() -> None:
    create_messaging_indexes_v2(op, SCHEMA)


def downgrade() -> None:
    drop_messaging_indexes_v2(op, SCHEMA)

"""pedidos: when it last produced and consumed each event schema version, and its published view

`schema_version_use` (event type, version, produced or consumed, last seen) and
`pedidos_read.schema_version_use_v1`, granted to `pedidos_reader`: what `sagactl schemas retire`
reads before it retires a version (sagakit.schema_versions.last_seen).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""
from collections.abc import Sequence

from alembic import op

from sagakit.schema_versions.last_seen import (
    create_schema_version_use_v1,
    drop_schema_version_use_v1,
)

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pedidos"


def upgrade() -> None:
    create_schema_version_use_v1(op, SCHEMA)


def downgrade() -> None:
    drop_schema_version_use_v1(op, SCHEMA)

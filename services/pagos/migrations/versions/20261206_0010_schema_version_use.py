"""pagos: when it last produced and consumed each event schema version, and its published view

`schema_version_use` (event type, version, produced or consumed, last seen) and
`pagos_read.schema_version_use_v1`, granted to `pagos_reader`: what `sagactl schemas retire`
reads before it retires a version (sagakit.schema_versions.last_seen).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""
from collections.abc import Sequence

from alembic import op

from sagakit.schema_versions.last_seen import (
    create_schema_version_use_v1,
    drop_schema_version_use_v1,
)

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pagos"


def upgrade() -> None:
    create_schema_version_use_v1(op, SCHEMA)


def downgrade() -> None:
    drop_schema_version_use_v1(op, SCHEMA)

"""inventario: each stock check keeps the answer it sent

`stock_checks.answer`: the event the check answered with (its type and payload), so that the
saga's OrdenSolicitada handled again (an operator's retry, a dead letter's replay) is answered
with the same event, never with a second check's (inventario.usecases.validate_stock). Checks
recorded before it have none (NULL): they are not answered again.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "inventario"


def upgrade() -> None:
    op.add_column("stock_checks", sa.Column("answer", JSONB), schema=SCHEMA)


def downgrade() -> None:
    op.drop_column("stock_checks", "answer", schema=SCHEMA)

"""pagos: whose payment it is

A customer reads only its own payments (GET /payments). The customer comes with the events'
envelope (``metadata.user_id``; pagos.usecases.customer). Payments recorded before stay without
one: operators alone see them.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pagos"


def upgrade() -> None:
    op.add_column("payments", sa.Column("customer_id", sa.Text), schema=SCHEMA)


def downgrade() -> None:
    op.drop_column("payments", "customer_id", schema=SCHEMA)

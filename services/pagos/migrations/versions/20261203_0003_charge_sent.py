"""pagos: when a charge call may first have reached the gateway

A cancellation decides on it whether the charge's outcome must be resolved with the gateway
(a call may have gone through) or the charge can simply be dropped (no call was ever sent, and
none will be: the worker marks the payment right before calling, under the row's lock).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pagos"


def upgrade() -> None:
    op.add_column("payments", sa.Column("charge_sent_at", sa.DateTime(timezone=True)),
                  schema=SCHEMA)
    # Rows from before the column: a charge with a recorded attempt or a lease may have been
    # sent. Assume so (a resolution by the idempotent replay), never the opposite.
    op.execute(f"UPDATE {SCHEMA}.payments SET charge_sent_at = updated_at "
               "WHERE charge_sent_at IS NULL AND (charge_attempts > 0 OR lease_until IS NOT NULL)")


def downgrade() -> None:
    op.drop_column("payments", "charge_sent_at", schema=SCHEMA)

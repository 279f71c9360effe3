"""pagos: payments (with their durable retry schedule), outbox and inbox

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from sagakit.store.migrations import create_messaging_tables_v1, drop_messaging_tables_v1

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pagos"
STATUSES = ("CHARGING", "CAPTURED", "DECLINED", "CHARGE_FAILED", "CANCELLED", "CANCEL_REQUESTED",
            "REFUNDING", "REFUNDED", "REFUND_FAILED")


def upgrade() -> None:
    create_messaging_tables_v1(op, SCHEMA)
    op.create_table(
        "payments",
        sa.Column("payment_id", sa.Uuid, primary_key=True),
        sa.Column("saga_id", sa.Text, nullable=False),
        sa.Column("order_id", sa.Uuid),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("amount", sa.Numeric(12, 2)),
        sa.Column("currency", sa.Text),
        sa.Column("payment_token", sa.Text),
        sa.Column("charge_id", sa.Text),
        sa.Column("decline_code", sa.Text),
        sa.Column("refund_id", sa.Text),
        sa.Column("amount_refunded", sa.Numeric(12, 2), nullable=False, server_default="0"),
        sa.Column("charge_attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("refund_attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True)),
        sa.Column("lease_until", sa.DateTime(timezone=True)),
        sa.Column("attempt_log", postgresql.JSONB, nullable=False, server_default="[]"),
        sa.Column("manual_refund_required", sa.Boolean, nullable=False,
                  server_default=sa.false()),
        sa.Column("trigger", postgresql.JSONB),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.UniqueConstraint("saga_id"),
        sa.CheckConstraint("status IN (" + ", ".join(f"'{s}'" for s in STATUSES) + ")",
                           name="status"),
        sa.CheckConstraint("amount IS NULL OR amount >= 0", name="amount_not_negative"),
        sa.CheckConstraint("amount IS NULL OR amount_refunded <= amount",
                           name="refund_within_charge"),
        schema=SCHEMA,
    )
    # The gateway worker's queue: due work, oldest first.
    op.create_index("ix_payments_due", "payments", ["next_attempt_at"], schema=SCHEMA,
                    postgresql_where=sa.text("next_attempt_at IS NOT NULL"))


def downgrade() -> None:
    op.drop_table("payments", schema=SCHEMA)
    drop_messaging_tables_v1(op, SCHEMA)

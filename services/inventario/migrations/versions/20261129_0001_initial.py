"""inventario: products, stock checks, allocations, outbox and inbox

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

SCHEMA = "inventario"


def upgrade() -> None:
    create_messaging_tables_v1(op, SCHEMA)
    op.create_table(
        "products",
        sa.Column("sku", sa.Text, primary_key=True),
        sa.Column("quantity", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.CheckConstraint("quantity >= 0", name="quantity_not_negative"),
        schema=SCHEMA,
    )
    op.create_table(
        "stock_checks",
        sa.Column("saga_id", sa.Text, primary_key=True),
        sa.Column("order_id", sa.Uuid, nullable=False),
        sa.Column("items", postgresql.JSONB, nullable=False),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        schema=SCHEMA,
    )
    op.create_table(
        "allocations",
        sa.Column("saga_id", sa.Text, primary_key=True),
        sa.Column("order_id", sa.Uuid),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("items", postgresql.JSONB, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.CheckConstraint("status IN ('ALLOCATED', 'FAILED', 'RELEASED', 'BLOCKED')",
                           name="status"),
        schema=SCHEMA,
    )
    # The published read contract (docs/operations.md#the-read-contract): stock levels, nothing else.
    op.execute(f"CREATE VIEW {SCHEMA}.v1_stock_levels AS "
               f"SELECT sku, quantity, updated_at FROM {SCHEMA}.products")


def downgrade() -> None:
    op.execute(f"DROP VIEW IF EXISTS {SCHEMA}.v1_stock_levels")
    op.drop_table("allocations", schema=SCHEMA)
    op.drop_table("stock_checks", schema=SCHEMA)
    op.drop_table("products", schema=SCHEMA)
    drop_messaging_tables_v1(op, SCHEMA)

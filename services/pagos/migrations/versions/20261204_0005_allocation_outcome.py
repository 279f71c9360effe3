"""pagos: what inventario answered a captured charge with

A StockAsignado recorded on the payment (``stock_allocated_at``) makes a later FalloAsignacion
for the saga refund nothing: the goods are the customer's. A FalloAsignacion acted on
(``allocation_failed_at``) makes a later StockAsignado an alert: inventario said both. Payments
recorded before stay without either: pagos cannot know what inventario answered them, and
treats them as before (a FalloAsignacion refunds).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pagos"


def upgrade() -> None:
    op.add_column("payments", sa.Column("stock_allocated_at", sa.DateTime(timezone=True)),
                  schema=SCHEMA)
    op.add_column("payments", sa.Column("allocation_failed_at", sa.DateTime(timezone=True)),
                  schema=SCHEMA)


def downgrade() -> None:
    op.drop_column("payments", "allocation_failed_at", schema=SCHEMA)
    op.drop_column("payments", "stock_allocated_at", schema=SCHEMA)

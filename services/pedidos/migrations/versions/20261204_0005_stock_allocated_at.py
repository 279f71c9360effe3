"""pedidos: sagas.stock_allocated_at, a StockAsignado that came before the payment

An order completes only once both its payment and its allocation are in. A StockAsignado that
overtakes its PagoExitoso (they travel on different topics) moves nothing: the saga records
when it came, and its PagoExitoso completes the order. Nullable, no default: every saga in
flight has recorded no such allocation.

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

SCHEMA = "pedidos"


def upgrade() -> None:
    op.add_column("sagas", sa.Column("stock_allocated_at", sa.DateTime(timezone=True)),
                  schema=SCHEMA)


def downgrade() -> None:
    # A saga waiting for its payment with its stock allocated forgets the allocation: its
    # PagoExitoso then leaves it PENDIENTE_ASIGNACION, which its deadline cancels.
    op.drop_column("sagas", "stock_allocated_at", schema=SCHEMA)

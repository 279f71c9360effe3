"""pedidos: the indexes of the orders waiting for their payment, which the limits count

``POST /orders`` counts, per customer and per card, the orders still waiting for their payment
(``PENDIENTE_VALIDACION``, ``PENDIENTE_PAGO``) with the recent declines
(``pedidos.usecases.decline_velocity``), on every order. The two partial indexes hold only those
orders: a few per customer, however many it placed before.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pedidos"
# As ``pedidos.adapters.order_repository`` writes it: the planner uses a partial index for a
# query whose condition implies the index's own.
WAITING = sa.text("status IN ('PENDIENTE_VALIDACION', 'PENDIENTE_PAGO')")


def upgrade() -> None:
    op.create_index("ix_orders_waiting_by_customer", "orders", ["customer_id"], schema=SCHEMA,
                    postgresql_where=WAITING)
    op.create_index("ix_orders_waiting_by_card", "orders", ["card_fingerprint"], schema=SCHEMA,
                    postgresql_where=WAITING)


def downgrade() -> None:
    op.drop_index("ix_orders_waiting_by_card", "orders", schema=SCHEMA)
    op.drop_index("ix_orders_waiting_by_customer", "orders", schema=SCHEMA)

"""pedidos: orders.card_fingerprint, and the indexes the decline limits read

``card_fingerprint`` is the payment token's keyed fingerprint (pedidos.usecases.fingerprints),
which the decline limit per card counts; nullable: orders placed before have none, and count
for their customer only. ``request_hash`` becomes keyed too, in the code: the bare SHA-256
that orders placed before hold is still recognised for a request sent again under their
Idempotency-Key, and nothing here rewrites it (the clear token it was made of is gone).

The two partial indexes hold only declined orders: what ``POST /orders`` reads before it
takes an order, per customer and per card, over the last PEDIDOS_DECLINE_WINDOW_S.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pedidos"
DECLINED = sa.text("status = 'CANCELADA_PAGO_RECHAZADO'")


def upgrade() -> None:
    op.add_column("orders", sa.Column("card_fingerprint", sa.Text()), schema=SCHEMA)
    op.create_index("ix_orders_declined_by_customer", "orders", ["customer_id", "updated_at"],
                    schema=SCHEMA, postgresql_where=DECLINED)
    op.create_index("ix_orders_declined_by_card", "orders", ["card_fingerprint", "updated_at"],
                    schema=SCHEMA, postgresql_where=DECLINED)


def downgrade() -> None:
    op.drop_index("ix_orders_declined_by_card", "orders", schema=SCHEMA)
    op.drop_index("ix_orders_declined_by_customer", "orders", schema=SCHEMA)
    op.drop_column("orders", "card_fingerprint", schema=SCHEMA)

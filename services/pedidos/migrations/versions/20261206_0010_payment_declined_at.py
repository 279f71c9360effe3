"""pedidos: orders.payment_declined_at, what the decline limits count

A payment declined at the gateway is a decline whatever became of its order: the order may
have been cancelled (by its customer, by a deadline) before pedidos heard the PagoRechazado.
pedidos now records the decline on the order whenever it hears one
(``pedidos.usecases.track_saga``), and the decline limits of ``POST /orders`` count those
(``pedidos.adapters.order_queries.DeclineQueries``), no longer the orders that ended
CANCELADA_PAGO_RECHAZADO.

Orders that ended so within the longest decline window (7 days) take their last change as
their decline's time. The two partial indexes hold only declined orders, per customer and per
card.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pedidos"
DECLINED = sa.text("payment_declined_at IS NOT NULL")
WAS_DECLINED = sa.text("status = 'CANCELADA_PAGO_RECHAZADO'")


def upgrade() -> None:
    op.add_column("orders", sa.Column("payment_declined_at", sa.DateTime(timezone=True)),
                  schema=SCHEMA)
    op.execute(f"UPDATE {SCHEMA}.orders SET payment_declined_at = updated_at "
               "WHERE status = 'CANCELADA_PAGO_RECHAZADO' "
               "AND updated_at > now() - interval '7 days'")
    op.drop_index("ix_orders_declined_by_card", "orders", schema=SCHEMA)
    op.drop_index("ix_orders_declined_by_customer", "orders", schema=SCHEMA)
    op.create_index("ix_orders_declined_by_customer", "orders",
                    ["customer_id", "payment_declined_at"], schema=SCHEMA,
                    postgresql_where=DECLINED)
    op.create_index("ix_orders_declined_by_card", "orders",
                    ["card_fingerprint", "payment_declined_at"], schema=SCHEMA,
                    postgresql_where=DECLINED)


def downgrade() -> None:
    op.drop_index("ix_orders_declined_by_card", "orders", schema=SCHEMA)
    op.drop_index("ix_orders_declined_by_customer", "orders", schema=SCHEMA)
    op.create_index("ix_orders_declined_by_customer", "orders", ["customer_id", "updated_at"],
                    schema=SCHEMA, postgresql_where=WAS_DECLINED)
    op.create_index("ix_orders_declined_by_card", "orders", ["card_fingerprint", "updated_at"],
                    schema=SCHEMA, postgresql_where=WAS_DECLINED)
    op.drop_column("orders", "payment_declined_at", schema=SCHEMA)

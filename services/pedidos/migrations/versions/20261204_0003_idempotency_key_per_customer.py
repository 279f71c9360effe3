"""pedidos: an Idempotency-Key is unique per customer, not across all of them

Another customer who sends the same key gets an order of its own: a key names a request of its
customer only (and one customer could otherwise learn of, or be handed, another's order).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-04
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pedidos"
# The name PostgreSQL gave the column's UNIQUE of the initial migration.
GLOBAL = "orders_idempotency_key_key"
PER_CUSTOMER = "uq_orders_customer_id_idempotency_key"


def upgrade() -> None:
    op.create_unique_constraint(PER_CUSTOMER, "orders", ["customer_id", "idempotency_key"],
                                schema=SCHEMA)
    op.drop_constraint(GLOBAL, "orders", schema=SCHEMA, type_="unique")


def downgrade() -> None:
    # Fails if two customers have used the same key since: which order would keep it is not
    # this migration's to decide.
    op.create_unique_constraint(GLOBAL, "orders", ["idempotency_key"], schema=SCHEMA)
    op.drop_constraint(PER_CUSTOMER, "orders", schema=SCHEMA, type_="unique")

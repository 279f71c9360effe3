"""inventario: the payment a verified stock check asked pagos for

The allocation takes stock on a PagoExitoso only if it pays what the saga's check asked for
(the order's total in its currency, sent in StockVerificado); a check that did not verify the
stock asked for nothing and keeps NULL.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-04
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "inventario"


def upgrade() -> None:
    op.add_column("stock_checks", sa.Column("payment_amount", sa.Numeric(12, 2)), schema=SCHEMA)
    op.add_column("stock_checks", sa.Column("payment_currency", sa.Text), schema=SCHEMA)
    op.create_check_constraint(
        "ck_stock_checks_payment_whole", "stock_checks",
        "(payment_amount IS NULL) = (payment_currency IS NULL)", schema=SCHEMA)
    # Checks from before the columns: what each verified one asked for is in the StockVerificado
    # it wrote to the outbox in the same commit. A saga still running when this runs gets its
    # payment matched like any other; checks whose outbox row was already cleaned up belong to
    # sagas long over, and keep NULL (no payment requested).
    op.execute(f"""UPDATE {SCHEMA}.stock_checks AS c
SET payment_amount = CAST(o.payload->>'total_amount' AS numeric(12, 2)),
    payment_currency = o.payload->>'currency'
FROM {SCHEMA}.outbox AS o
WHERE o.saga_id = c.saga_id AND o.event_type = 'StockVerificado'
  AND c.result = 'verified' AND c.payment_amount IS NULL""")


def downgrade() -> None:
    op.drop_constraint("ck_stock_checks_payment_whole", "stock_checks", schema=SCHEMA)
    op.drop_column("stock_checks", "payment_currency", schema=SCHEMA)
    op.drop_column("stock_checks", "payment_amount", schema=SCHEMA)

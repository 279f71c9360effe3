"""inventario: allocation strategies per product and soft reservations with a deadline

``products.allocation_strategy``: how a product's orders take its units (check_then_pay, the
default; reserve_then_pay; auto). ``reservations``: the units a validation held for a saga
until ``expires_at`` (the database clock at the reservation plus the TTL), then CONFIRMED by
its allocation, RELEASED by its cancellation or EXPIRED by the expiry job. The partial indexes
serve what reads them: the live reservations of a product, and the earliest deadline.

``reserved_by_others``: the units other sagas hold, live, on a product, read with a snapshot of
its own (a VOLATILE function takes a fresh one for each query it runs, even inside one outer
statement). The statements that lock a product and then decide on its units call it after the
lock: a reservation committed while they waited for the lock is counted, which a subquery of
the same statement, on the statement's snapshot, would miss
(inventario.adapters.stock_repository). Its tables' schema is an argument: a scratch copy of
the tables in another schema (the tests') is read whole.

Read views: ``stock_v2`` (``stock_v1`` with the reserved and available units and the strategy)
and ``reservations_v1``.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from sagakit.store.read_views import drop_view, publish_view

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "inventario"

RESERVED_BY_OTHERS = """CREATE FUNCTION inventario.reserved_by_others(
    p_schema text, p_sku text, p_saga_id text) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    held integer;
BEGIN
    EXECUTE format('SELECT coalesce(sum(quantity), 0)::int FROM %I.reservations '
                   'WHERE sku = $1 AND status = ''RESERVED'' AND expires_at > now() '
                   'AND saga_id <> $2', p_schema)
        INTO held USING p_sku, p_saga_id;
    RETURN held;
END
$$"""

VIEWS = {
    "stock_v2": """SELECT p.sku, p.quantity, r.reserved,
       greatest(p.quantity - r.reserved, 0) AS available, p.allocation_strategy,
       p.price, p.currency, p.updated_at
FROM inventario.products AS p
CROSS JOIN LATERAL (SELECT coalesce(sum(quantity), 0)::int AS reserved
                    FROM inventario.reservations
                    WHERE sku = p.sku AND status = 'RESERVED' AND expires_at > now()) AS r""",
    "reservations_v1": """SELECT saga_id, sku, quantity, status, expires_at, created_at,
       updated_at
FROM inventario.reservations""",
}


def upgrade() -> None:
    op.add_column("products", sa.Column("allocation_strategy", sa.Text, nullable=False,
                                        server_default="check_then_pay"), schema=SCHEMA)
    op.create_check_constraint(
        "allocation_strategy_known", "products",
        "allocation_strategy IN ('check_then_pay', 'reserve_then_pay', 'auto')", schema=SCHEMA)
    op.create_table(
        "reservations",
        sa.Column("saga_id", sa.Text, primary_key=True),
        sa.Column("sku", sa.Text, primary_key=True),
        sa.Column("quantity", sa.Integer, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.CheckConstraint("quantity > 0", name="reservation_quantity_positive"),
        sa.CheckConstraint("status IN ('RESERVED', 'CONFIRMED', 'RELEASED', 'EXPIRED')",
                           name="reservation_status_known"),
        schema=SCHEMA)
    op.create_index("reservations_live_by_sku", "reservations", ["sku"], schema=SCHEMA,
                    postgresql_where=sa.text("status = 'RESERVED'"))
    op.create_index("reservations_live_by_deadline", "reservations", ["expires_at"],
                    schema=SCHEMA, postgresql_where=sa.text("status = 'RESERVED'"))
    # The auto strategy's in-flight demand: verified checks of the last TTL.
    op.create_index("stock_checks_verified_by_time", "stock_checks", ["checked_at"],
                    schema=SCHEMA, postgresql_where=sa.text("result = 'verified'"))
    op.execute(RESERVED_BY_OTHERS)
    for name, select in VIEWS.items():
        publish_view(op, SCHEMA, name, select)


def downgrade() -> None:
    for name in reversed(VIEWS):
        drop_view(op, SCHEMA, name)
    op.execute("DROP FUNCTION inventario.reserved_by_others(text, text, text)")
    op.drop_index("stock_checks_verified_by_time", "stock_checks", schema=SCHEMA)
    op.drop_table("reservations", schema=SCHEMA)
    op.drop_constraint("allocation_strategy_known", "products", schema=SCHEMA)
    op.drop_column("products", "allocation_strategy", schema=SCHEMA)

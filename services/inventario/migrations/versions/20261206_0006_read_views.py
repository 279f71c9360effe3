"""inventario: the operator actions' audit and the published read views v1

``inventario_read`` publishes the stock, the checks, the allocations, the outbox, its backlog,
the inbox and the operator actions to ``inventario_reader`` (docs/operations.md, "The read
contract"); never an event's payload.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06
"""
from collections.abc import Sequence

from alembic import op

from sagakit.store.read_views import (
    create_messaging_views_v1,
    create_operator_actions_v1,
    drop_messaging_views_v1,
    drop_operator_actions_v1,
    drop_view,
    publish_view,
)

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "inventario"

VIEWS = {
    "stock_v1": """SELECT sku, quantity, price, currency, updated_at
FROM inventario.products""",
    "stock_checks_v1": """SELECT saga_id, order_id, result, items, payment_amount,
       payment_currency, checked_at
FROM inventario.stock_checks""",
    "allocations_v1": """SELECT saga_id, order_id, status, items, created_at, updated_at
FROM inventario.allocations""",
}


def upgrade() -> None:
    create_operator_actions_v1(op, SCHEMA)
    create_messaging_views_v1(op, SCHEMA)
    for name, select in VIEWS.items():
        publish_view(op, SCHEMA, name, select)


def downgrade() -> None:
    for name in reversed(VIEWS):
        drop_view(op, SCHEMA, name)
    drop_messaging_views_v1(op, SCHEMA)
    drop_operator_actions_v1(op, SCHEMA)

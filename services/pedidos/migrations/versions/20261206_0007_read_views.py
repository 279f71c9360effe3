"""pedidos: the operator actions' audit and the published read views v1

``pedidos.operator_actions`` records what an operator did through the API (a cancellation, a
step retried: who, when, why), in the same transaction as the action. ``pedidos_read`` publishes
the sagas, their history, the outbox, its backlog, the inbox and the operator actions to
``pedidos_reader`` (docs/operations.md, "The read contract"): never the payment token, the
shipping address or an event's payload.

Revision ID: 0007
Revises: 0006
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

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pedidos"

VIEWS = {
    "sagas_v1": """SELECT s.saga_id, s.saga_type, s.order_id, o.customer_id, s.status,
       s.current_step, o.total_amount, o.currency, o.items, o.charge_id, o.refund_status,
       o.cancel_reason, s.started_at, s.updated_at, s.step_started_at, s.step_deadline_at,
       s.expires_at, s.finished_at, s.stock_allocated_at,
       NULLIF(split_part(s.context->>'traceparent', '-', 2), '') AS trace_id
FROM pedidos.sagas s JOIN pedidos.orders o ON o.order_id = s.order_id""",
    "saga_history_v1": """SELECT id, saga_id, at, event_type, from_status, to_status, actor,
       message_id, detail
FROM pedidos.saga_audit""",
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

"""pagos: the operator actions' audit, a payment's manual resolution, the read views v1

``pagos.operator_actions`` records what an operator did through the API; a payment marked for
a manual refund is resolved by one (``payment_resolved``, the finance system's reference), at
most once per payment (a unique index: two resolutions racing, one commits).

``pagos_read`` publishes the payments (never their token, sealed or not, nor the event that
asked for the charge), every gateway attempt, the payments that still need a person, the
outbox, its backlog, the inbox and the operator actions to ``pagos_reader``
(docs/operations.md, "The read contract").

Revision ID: 0008
Revises: 0007
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

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pagos"

# Token-shaped text masked, as saga_contracts.redaction.TOKEN_TEXT does: an attempt's detail
# quotes what the gateway or the sealing refused.
_MASKED_DETAIL = (r"regexp_replace(a.entry->>'detail', "
                  r"'sealed:v[0-9]+:[A-Za-z0-9_-]*(:[A-Za-z0-9_-]*)?|tok_[A-Za-z0-9_-]+', "
                  r"'***', 'g')")
_RESOLUTION = """LEFT JOIN pagos.operator_actions r
  ON r.action = 'payment_resolved' AND r.target = p.payment_id::text"""

VIEWS = {
    "payments_v1": f"""SELECT p.payment_id, p.saga_id, p.order_id, p.customer_id, p.status,
       p.amount, p.currency, p.charge_id, p.decline_code, p.refund_id, p.amount_refunded,
       p.charge_attempts, p.resolve_attempts, p.refund_attempts, p.manual_refund_required,
       p.charge_sent_at, p.stock_allocated_at, p.allocation_failed_at, p.created_at,
       p.updated_at, r.at AS resolved_at, r.operator AS resolved_by,
       r.detail->>'reference' AS resolution_reference
FROM pagos.payments p {_RESOLUTION}""",
    "payment_attempts_v1": f"""SELECT p.payment_id, p.saga_id, a.n AS seq,
       a.entry->>'kind' AS kind, (a.entry->>'attempt')::integer AS attempt,
       (a.entry->>'at')::timestamptz AS at, a.entry->>'outcome' AS outcome,
       {_MASKED_DETAIL} AS detail
FROM pagos.payments p,
     jsonb_array_elements(p.attempt_log) WITH ORDINALITY AS a(entry, n)""",
    "payments_needing_action_v1": f"""SELECT p.payment_id, p.saga_id, p.order_id,
       p.customer_id, p.status, p.amount, p.currency, p.charge_id, p.refund_id,
       p.amount_refunded, p.charge_attempts, p.resolve_attempts, p.refund_attempts,
       p.updated_at AS marked_at
FROM pagos.payments p {_RESOLUTION}
WHERE (p.manual_refund_required OR p.status = 'REFUND_FAILED') AND r.id IS NULL""",
}


def upgrade() -> None:
    create_operator_actions_v1(op, SCHEMA)
    op.create_index("ux_operator_actions_payment_resolved", "operator_actions", ["target"],
                    schema=SCHEMA, unique=True,
                    postgresql_where="action = 'payment_resolved'")
    # The payments that may need a person are few: the gauge (every few seconds) and the view
    # read them without scanning every payment.
    op.create_index("ix_payments_needing_action", "payments", ["payment_id"], schema=SCHEMA,
                    postgresql_where="manual_refund_required OR status = 'REFUND_FAILED'")
    create_messaging_views_v1(op, SCHEMA)
    for name, select in VIEWS.items():
        publish_view(op, SCHEMA, name, select)


def downgrade() -> None:
    for name in reversed(VIEWS):
        drop_view(op, SCHEMA, name)
    drop_messaging_views_v1(op, SCHEMA)
    op.drop_index("ix_payments_needing_action", "payments", schema=SCHEMA)
    drop_operator_actions_v1(op, SCHEMA)

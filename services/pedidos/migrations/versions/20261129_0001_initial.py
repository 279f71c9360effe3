"""pedidos: orders, sagas, audit trail, notifications, outbox and inbox

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from sagakit.store.migrations import create_messaging_tables_v1, drop_messaging_tables_v1

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pedidos"
STATUSES = ("PENDIENTE_VALIDACION", "PENDIENTE_PAGO", "PENDIENTE_ASIGNACION",
            "PENDIENTE_REEMBOLSO", "COMPLETADA", "CANCELADA_SIN_STOCK",
            "CANCELADA_PAGO_RECHAZADO", "CANCELADA_CON_REEMBOLSO", "CANCELADA_TIMEOUT",
            "CANCELADA_POR_USUARIO", "REEMBOLSO_FALLIDO", "TIMED_OUT")
ACTIVE = STATUSES[:4]


def _status_check() -> sa.CheckConstraint:
    return sa.CheckConstraint("status IN (" + ", ".join(f"'{s}'" for s in STATUSES) + ")",
                              name="status")


def upgrade() -> None:
    create_messaging_tables_v1(op, SCHEMA)
    now = sa.func.now()
    op.create_table(
        "orders",
        sa.Column("order_id", sa.Uuid, primary_key=True),
        sa.Column("saga_id", sa.Uuid, nullable=False, unique=True),
        sa.Column("customer_id", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("items", postgresql.JSONB, nullable=False),
        sa.Column("total_amount", sa.Numeric(12, 2), nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("shipping_address", postgresql.JSONB, nullable=False),
        sa.Column("payment_type", sa.Text, nullable=False),
        sa.Column("idempotency_key", sa.Text, unique=True),
        sa.Column("request_hash", sa.Text, nullable=False),
        sa.Column("charge_id", sa.Text),
        sa.Column("refund_status", sa.Text),
        sa.Column("cancel_reason", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        _status_check(),
        sa.CheckConstraint("total_amount >= 0", name="total_not_negative"),
        schema=SCHEMA,
    )
    op.create_table(
        "sagas",
        sa.Column("saga_id", sa.Uuid, primary_key=True),
        sa.Column("saga_type", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("current_step", sa.Text),
        sa.Column("order_id", sa.Uuid, nullable=False),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("context", postgresql.JSONB, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.Column("step_started_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=now),
        sa.Column("step_deadline_at", sa.DateTime(timezone=True)),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        _status_check(),
        schema=SCHEMA,
    )
    active = ", ".join(f"'{s}'" for s in ACTIVE)
    # The deadline scanner's two queries stay on small partial indexes.
    op.create_index("ix_sagas_step_deadline", "sagas", ["step_deadline_at"], schema=SCHEMA,
                    postgresql_where=sa.text(f"status IN ({active})"))
    op.create_index("ix_sagas_expires_at", "sagas", ["expires_at"], schema=SCHEMA,
                    postgresql_where=sa.text(f"status IN ({active})"))
    op.create_index("ix_sagas_status_started", "sagas", ["status", "started_at"], schema=SCHEMA)
    op.create_table(
        "saga_audit",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("saga_id", sa.Uuid, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.Column("from_status", sa.Text),
        sa.Column("to_status", sa.Text),
        sa.Column("event_type", sa.Text, nullable=False),
        sa.Column("message_id", sa.Text),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("detail", postgresql.JSONB, nullable=False, server_default="{}"),
        schema=SCHEMA,
    )
    op.create_index("ix_saga_audit_saga_id", "saga_audit", ["saga_id", "id"], schema=SCHEMA)
    op.create_table(
        "notifications",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("order_id", sa.Uuid, nullable=False),
        sa.Column("customer_id", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        schema=SCHEMA,
    )
    # Audit data is never deleted or rewritten (docs/standard.md#audit-trail, #timeouts): the
    # runtime role may only append to it. ALTER DEFAULT PRIVILEGES granted the runtime role every
    # table privilege.
    op.execute(f"DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{SCHEMA}_app') "
               f"THEN REVOKE UPDATE, DELETE, TRUNCATE ON {SCHEMA}.saga_audit FROM {SCHEMA}_app; "
               "END IF; END $$")


def downgrade() -> None:
    op.drop_table("notifications", schema=SCHEMA)
    op.drop_table("saga_audit", schema=SCHEMA)
    op.drop_table("sagas", schema=SCHEMA)
    op.drop_table("orders", schema=SCHEMA)
    drop_messaging_tables_v1(op, SCHEMA)

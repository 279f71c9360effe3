"""pedidos' tables, in its own schema."""

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Numeric,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

from sagakit.store import messaging_tables, operator_actions_table, service_metadata

SCHEMA = "pedidos"
metadata = service_metadata(SCHEMA)
messaging = messaging_tables(metadata)
operator_actions = operator_actions_table(metadata)

orders = Table(
    "orders", metadata,
    Column("order_id", Uuid, primary_key=True),
    Column("saga_id", Uuid, nullable=False, unique=True),
    Column("customer_id", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("items", JSONB, nullable=False),
    Column("total_amount", Numeric(12, 2), nullable=False),
    Column("currency", Text, nullable=False),
    Column("shipping_address", JSONB, nullable=False),
    Column("payment_type", Text, nullable=False),
    # Unique per customer (migration 0003): a key names a request of its customer only.
    Column("idempotency_key", Text),
    # Keyed (pedidos.usecases.fingerprints): "hmac-sha256:<hex>"; a bare SHA-256 in orders
    # placed before the key (migration 0007).
    Column("request_hash", Text, nullable=False),
    # The payment token's keyed fingerprint, for the decline limit per card (migration 0007).
    Column("card_fingerprint", Text),
    Column("charge_id", Text),
    Column("refund_status", Text),
    Column("cancel_reason", Text),
    # When its payment was declined (PagoRechazado), whatever became of the order: what the
    # decline limits of POST /orders count (migration 0010).
    Column("payment_declined_at", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("customer_id", "idempotency_key"),
)

# docs/standard.md#the-saga-table: one row per saga with its step, deadlines and business context.
sagas = Table(
    "sagas", metadata,
    Column("saga_id", Uuid, primary_key=True),
    Column("saga_type", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("current_step", Text),
    Column("order_id", Uuid, nullable=False),
    Column("owner", Text, nullable=False),
    Column("context", JSONB, nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("step_started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("step_deadline_at", DateTime(timezone=True)),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    # When a StockAsignado that came before the payment was recorded (migration 0005): the
    # order completes on its PagoExitoso, not on the allocation alone.
    Column("stock_allocated_at", DateTime(timezone=True)),
)

# docs/standard.md#audit-trail: every transition and every event, never deleted.
saga_audit = Table(
    "saga_audit", metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("saga_id", Uuid, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("from_status", Text),
    Column("to_status", Text),
    Column("event_type", Text, nullable=False),
    Column("message_id", Text),
    Column("actor", Text, nullable=False),
    Column("detail", JSONB, nullable=False, server_default="{}"),
)

notifications = Table(
    "notifications", metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("order_id", Uuid, nullable=False),
    Column("customer_id", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("message", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

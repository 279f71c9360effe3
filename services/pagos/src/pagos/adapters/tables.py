"""pagos' tables, in its own schema."""

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Integer,
    Numeric,
    Table,
    Text,
    Uuid,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

from sagakit.store import messaging_tables, operator_actions_table, service_metadata

SCHEMA = "pagos"
metadata = service_metadata(SCHEMA)
messaging = messaging_tables(metadata)
operator_actions = operator_actions_table(metadata)

payments = Table(
    "payments", metadata,
    Column("payment_id", Uuid, primary_key=True),
    Column("saga_id", Text, nullable=False, unique=True),
    Column("order_id", Uuid),
    # Whose payment (pagos.usecases.customer): a customer reads only its own. NULL for a
    # payment of an event that did not name one; operators alone see it.
    Column("customer_id", Text),
    Column("status", Text, nullable=False),
    Column("amount", Numeric(12, 2)),
    Column("currency", Text),
    Column("payment_token", Text),  # sensitive: never logged, cleared once no call needs it
    Column("charge_id", Text),
    Column("decline_code", Text),
    Column("refund_id", Text),
    Column("amount_refunded", Numeric(12, 2), nullable=False, server_default="0"),
    Column("charge_attempts", Integer, nullable=False, server_default="0"),
    # The replays that resolve a cancelled charge (CANCEL_REQUESTED): a budget of their own,
    # which the charge's calls before the cancellation never use up.
    Column("resolve_attempts", Integer, nullable=False, server_default="0"),
    Column("refund_attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", DateTime(timezone=True)),
    Column("lease_until", DateTime(timezone=True)),
    # Set right before the first charge call is sent: from then on the charge may have
    # happened, and only the gateway can say whether it did.
    Column("charge_sent_at", DateTime(timezone=True)),
    # What inventario answered the captured charge with, as pagos heard it: a FalloAsignacion
    # for a saga whose stock was allocated refunds nothing (pagos.domain.payment).
    Column("stock_allocated_at", DateTime(timezone=True)),
    Column("allocation_failed_at", DateTime(timezone=True)),
    Column("attempt_log", JSONB, nullable=False, server_default="[]"),
    Column("manual_refund_required", Boolean, nullable=False, server_default="false"),
    Column("trigger", JSONB),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

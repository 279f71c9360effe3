"""inventario's tables, in its own schema."""

from sqlalchemy import (
    CheckConstraint,
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

from sagakit.store.tables import messaging_tables, service_metadata

SCHEMA = "inventario"
metadata = service_metadata(SCHEMA)
messaging = messaging_tables(metadata)

# A product's catalog price, when it has one, is what an order for it is charged; a product
# without one (NULL) is not for sale.
products = Table(
    "products", metadata,
    Column("sku", Text, primary_key=True),
    Column("quantity", Integer, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("price", Numeric(12, 2)),
    Column("currency", Text),
    # How its orders take its units (inventario.domain.allocation_strategy).
    Column("allocation_strategy", Text, nullable=False, server_default="check_then_pay"),
    CheckConstraint("quantity >= 0", name="quantity_not_negative"),
    CheckConstraint("(price IS NULL) = (currency IS NULL)", name="price_whole"),
    CheckConstraint("price > 0", name="price_positive"),
)

# The outcome of each validation: what was asked, so allocation knows what to lock later, and
# the payment a verified check asked pagos for (NULL when it asked for none), so allocation
# takes stock only for that payment.
stock_checks = Table(
    "stock_checks", metadata,
    Column("saga_id", Text, primary_key=True),
    Column("order_id", Uuid, nullable=False),
    Column("items", JSONB, nullable=False),
    Column("result", Text, nullable=False),
    Column("payment_amount", Numeric(12, 2)),
    Column("payment_currency", Text),
    Column("checked_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # The event the check answered with ({"event_type", "payload"}): the saga's answer, sent
    # again when its OrdenSolicitada is handled again.
    Column("answer", JSONB),
    CheckConstraint("(payment_amount IS NULL) = (payment_currency IS NULL)",
                    name="payment_whole"),
)

allocations = Table(
    "allocations", metadata,
    Column("saga_id", Text, primary_key=True),
    Column("order_id", Uuid),
    Column("status", Text, nullable=False),
    Column("items", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# Units a validation held for a saga until ``expires_at`` (the database clock at the reservation
# plus the TTL): RESERVED until its allocation CONFIRMS it, its cancellation RELEASES it or the
# expiry job marks it EXPIRED. Only a RESERVED row whose deadline is ahead holds units.
reservations = Table(
    "reservations", metadata,
    Column("saga_id", Text, primary_key=True),
    Column("sku", Text, primary_key=True),
    Column("quantity", Integer, nullable=False),
    Column("status", Text, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

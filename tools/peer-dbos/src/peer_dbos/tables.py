"""The peer's own rows: the catalogue it checks and allocates from, and its orders. DBOS keeps
its workflow state and step checkpoints in its own schemas (settings.system_schema and the
datasource's settings.APP_SCHEMA)."""

from __future__ import annotations

from peer_dbos.settings import APP_SCHEMA

DDL = f"""
CREATE SCHEMA IF NOT EXISTS {APP_SCHEMA};
CREATE TABLE IF NOT EXISTS {APP_SCHEMA}.products (
    sku text PRIMARY KEY,
    quantity integer NOT NULL CHECK (quantity >= 0),
    price numeric(12, 2) NOT NULL,
    currency text NOT NULL
);
CREATE TABLE IF NOT EXISTS {APP_SCHEMA}.orders (
    order_id uuid PRIMARY KEY,
    customer_id text NOT NULL,
    items jsonb NOT NULL,
    total_minor bigint NOT NULL,
    currency text NOT NULL,
    status text NOT NULL,
    charge_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
"""

# The statuses an order of the peer ends in: pedidos' names for the same outcomes.
TERMINAL = ("COMPLETADA", "CANCELADA_SIN_STOCK", "CANCELADA_PRECIO_RECHAZADO",
            "CANCELADA_PAGO_RECHAZADO", "CANCELADA_CON_REEMBOLSO", "CANCELADA_TIMEOUT",
            "REEMBOLSO_FALLIDO")

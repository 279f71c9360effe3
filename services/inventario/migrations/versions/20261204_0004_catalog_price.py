"""inventario: a product's catalog price and currency

An order is charged its products' catalog prices, computed by inventario at validation; a
product without a price (NULL, as every product was before this revision) is not for sale
until an operator gives it one (PUT /products/{sku} with price and currency).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "inventario"


def upgrade() -> None:
    op.add_column("products", sa.Column("price", sa.Numeric(12, 2)), schema=SCHEMA)
    op.add_column("products", sa.Column("currency", sa.Text), schema=SCHEMA)
    op.create_check_constraint("ck_products_price_whole", "products",
                               "(price IS NULL) = (currency IS NULL)", schema=SCHEMA)
    op.create_check_constraint("ck_products_price_positive", "products", "price > 0",
                               schema=SCHEMA)


def downgrade() -> None:
    op.drop_constraint("ck_products_price_positive", "products", schema=SCHEMA)
    op.drop_constraint("ck_products_price_whole", "products", schema=SCHEMA)
    op.drop_column("products", "currency", schema=SCHEMA)
    op.drop_column("products", "price", schema=SCHEMA)

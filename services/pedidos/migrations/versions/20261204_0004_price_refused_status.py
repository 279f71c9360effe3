"""pedidos: CANCELADA_PRECIO_RECHAZADO, an order whose prices are not the catalog's

inventario refuses an order whose items are not at their products' catalog prices
(PrecioRechazado) and the saga ends there, without a charge. The orders' and sagas' status
checks (named ``status``, as 0001 made them) admit the new terminal status.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pedidos"
BEFORE = ("PENDIENTE_VALIDACION", "PENDIENTE_PAGO", "PENDIENTE_ASIGNACION",
          "PENDIENTE_REEMBOLSO", "COMPLETADA", "CANCELADA_SIN_STOCK",
          "CANCELADA_PAGO_RECHAZADO", "CANCELADA_CON_REEMBOLSO", "CANCELADA_TIMEOUT",
          "CANCELADA_POR_USUARIO", "REEMBOLSO_FALLIDO", "TIMED_OUT")
AFTER = (*BEFORE, "CANCELADA_PRECIO_RECHAZADO")


def _status_check(statuses: tuple[str, ...]) -> None:
    listed = ", ".join(f"'{s}'" for s in statuses)
    for table in ("orders", "sagas"):
        op.drop_constraint("status", table, type_="check", schema=SCHEMA)
        op.create_check_constraint("status", table, f"status IN ({listed})", schema=SCHEMA)


def upgrade() -> None:
    _status_check(AFTER)


def downgrade() -> None:
    # Fails while an order or saga is CANCELADA_PRECIO_RECHAZADO: such rows have no older
    # status that would say what happened to them.
    _status_check(BEFORE)

"""inventario: the units of Check-Then-Pay orders in flight, read with a snapshot of its own

``checked_in_flight``: the units of a product that other sagas' verified stock checks of the
last ``p_window_s`` seconds asked for, neither allocated since nor holding a live reservation:
Check-Then-Pay orders on their way to their payment. The ``auto`` strategy decides on them
under the product's lock (inventario.adapters.stock_repository): whether an order may still
check without reserving, and how many units a reservation may hold beside them. Like
``reserved_by_others`` (0009) it reads with a snapshot of its own, taken when it is called,
so that a check committed while the caller waited for the lock counts; its tables' schema is
an argument.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""
from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECKED_IN_FLIGHT = """CREATE FUNCTION inventario.checked_in_flight(
    p_schema text, p_sku text, p_saga_id text, p_window_s double precision) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    units integer;
BEGIN
    EXECUTE format(
        'SELECT coalesce(sum((l->>''quantity'')::int), 0)::int '
        'FROM %1$I.stock_checks AS v CROSS JOIN LATERAL jsonb_array_elements(v.items) AS l '
        'WHERE v.result = ''verified'' '
        '  AND v.checked_at > now() - make_interval(secs => $3) '
        '  AND v.saga_id <> $2 AND l->>''sku'' = $1 '
        '  AND NOT EXISTS (SELECT 1 FROM %1$I.allocations AS a WHERE a.saga_id = v.saga_id) '
        '  AND NOT EXISTS (SELECT 1 FROM %1$I.reservations AS r WHERE r.saga_id = v.saga_id '
        '                  AND r.status = ''RESERVED'' AND r.expires_at > now())', p_schema)
        INTO units USING p_sku, p_saga_id, p_window_s;
    RETURN units;
END
$$"""


def upgrade() -> None:
    op.execute(CHECKED_IN_FLIGHT)


def downgrade() -> None:
    op.execute("DROP FUNCTION inventario.checked_in_flight(text, text, text, double precision)")

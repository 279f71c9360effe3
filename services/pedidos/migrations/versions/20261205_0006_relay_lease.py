"""pedidos: the outbox relay's lease

The relay that publishes the outbox holds a lease row (expiry by the database's clock, a fencing
epoch) in place of a session advisory lock, so that a relay that hangs or is cut off loses the
lead within the lease and whatever it sends afterwards is refused (ADR 0012).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""
from collections.abc import Sequence

from alembic import op

from sagakit.store.migrations import create_relay_lease_v3, drop_relay_lease_v3

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pedidos"


def upgrade() -> None:
    create_relay_lease_v3(op, SCHEMA)


def downgrade() -> None:
    drop_relay_lease_v3(op, SCHEMA)

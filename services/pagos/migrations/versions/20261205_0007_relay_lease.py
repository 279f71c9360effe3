"""pagos: the outbox relay's lease

The relay that publishes the outbox holds a lease row (expiry by the database's clock, a fencing
epoch) in place of a session advisory lock, so that a relay that hangs or is cut off loses the
lead within the lease and whatever it sends afterwards is refused (ADR 0012).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05
"""
from collections.abc import Sequence

from alembic import op

from sagakit.store.migrations import create_relay_lease_v3, drop_relay_lease_v3

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pagos"


def upgrade() -> None:
    create_relay_lease_v3(op, SCHEMA)


def downgrade() -> None:
    drop_relay_lease_v3(op, SCHEMA)

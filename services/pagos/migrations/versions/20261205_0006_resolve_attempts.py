"""pagos: the replays that resolve a cancelled charge, counted apart from its charge calls

A charge cancelled while its outcome was unknown is replayed under its key up to
PAGOS_RESOLVE_ATTEMPTS times (``resolve_attempts``); the calls the charge made before (its
retries during a gateway outage) stay in ``charge_attempts`` and no longer use that budget up.
A payment being resolved when this runs starts its count at zero: it gets every replay, rather
than fewer than were promised.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "pagos"


def upgrade() -> None:
    op.add_column("payments", sa.Column("resolve_attempts", sa.Integer, nullable=False,
                                        server_default="0"), schema=SCHEMA)


def downgrade() -> None:
    op.drop_column("payments", "resolve_attempts", schema=SCHEMA)

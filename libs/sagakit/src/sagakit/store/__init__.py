"""A service's PostgreSQL side of the messaging: the engine and its pool (``database``),
statements sent on the driver itself (``driver``), the messaging tables and their migrations
(``tables``, ``migrations``, ``alembic_env``), the unit of work and the commit statement it
sends (``unit_of_work``, ``commit_statement``), several units in one transaction
(``shared_transaction``), the signal that wakes the outbox's relay (``outbox_signal``), inbox
housekeeping (``inbox``) and races run again (``conflicts``).

A service imports what it uses from here (and ``driver``, for its reads on the driver); its
migration scripts use ``migrations`` and ``alembic_env``. The other modules are the store's own.
"""

from sagakit.store.commit_statement import Part, StagedWrite, WriteShape
from sagakit.store.conflicts import retry_on_conflict
from sagakit.store.postgres_url import postgres_target
from sagakit.store.shared_transaction import SharedTransaction
from sagakit.store.tables import (
    MessagingTables,
    messaging_tables,
    operator_actions_table,
    service_metadata,
)
from sagakit.store.unit_of_work import AlreadyProcessed, UnitOfWork, UnitOfWorkFactory

__all__ = ["AlreadyProcessed", "MessagingTables", "Part", "SharedTransaction", "StagedWrite",
           "UnitOfWork", "UnitOfWorkFactory", "WriteShape", "messaging_tables",
           "operator_actions_table", "postgres_target", "retry_on_conflict", "service_metadata"]

"""A service's PostgreSQL side of the messaging: the engine and its pool (``database``),
statements sent on the driver itself (``driver``), the messaging tables and their migrations
(``tables``, ``migrations``, ``alembic_env``), the unit of work and the commit statement it
sends (``unit_of_work``, ``commit_statement``), several units in one transaction
(``shared_transaction``), inbox housekeeping (``inbox``) and races run again (``conflicts``).
"""

from sagakit.store.commit_statement import StagedWrite
from sagakit.store.shared_transaction import SharedTransaction
from sagakit.store.unit_of_work import AlreadyProcessed, UnitOfWork, UnitOfWorkFactory

__all__ = ["AlreadyProcessed", "SharedTransaction", "StagedWrite", "UnitOfWork",
           "UnitOfWorkFactory"]

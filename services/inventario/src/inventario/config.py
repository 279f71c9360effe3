"""inventario settings (docs/standard.md#timeouts-of-each-service): a query may take 5 s, a row lock
may be waited for 10 s.

Both bounds hold for the stock allocation, whose one statement waits for the products' row
locks: a statement's timeout covers its lock waits, so the allocation's is the two together
(``allocation_statement_timeout_s``), and a lock waited for ends at the lock timeout (ADR 0001),
not at the statement timeout every other statement has.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class InventarioSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INVENTARIO_", extra="ignore")

    lock_timeout_s: float = Field(10.0, gt=0, le=60, description=(
        "Longest the stock allocation waits for a product's row lock; past it the attempt fails "
        "and is retried with backoff, then dead-lettered."))
    statement_timeout_s: float = Field(5.0, gt=0, le=60, description=(
        "PostgreSQL statement_timeout of every connection of inventario. The stock "
        "allocation's transaction has this plus INVENTARIO_LOCK_TIMEOUT_S, so that its lock "
        "waits end at the lock timeout."))

    @property
    def allocation_statement_timeout_s(self) -> float:
        """The allocation's statement timeout: its lock waits and its own work."""
        return self.lock_timeout_s + self.statement_timeout_s

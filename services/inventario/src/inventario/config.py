"""inventario settings (Part II §5.4): a query may take 5 s, a row lock may be waited for 10 s.

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

    reservation_ttl_s: float = Field(120.0, gt=0, le=86_400, description=(
        "How long a reserve_then_pay validation holds the units for its saga (from the "
        "database clock at the reservation). Longer than pedidos' PEDIDOS_PAYMENT_TIMEOUT_S "
        "plus a margin, so that a payment that succeeds in time always finds its units held "
        "(deploy/configuration.py checks it)."))
    auto_reserve_ratio: float = Field(0.5, gt=0, le=10, description=(
        "The auto strategy reserves when the units of orders in flight (verified within the "
        "reservation TTL, not allocated yet) plus the order's reach this share of the "
        "product's available units."))
    reservation_expiry_interval_s: float = Field(5.0, gt=0, le=300, description=(
        "Longest the reservation expiry job sleeps between two runs; it wakes sooner for the "
        "earliest deadline."))

    @property
    def allocation_statement_timeout_s(self) -> float:
        """The allocation's statement timeout: its lock waits and its own work."""
        return self.lock_timeout_s + self.statement_timeout_s

"""inventario settings (docs/standard.md#timeouts-of-each-service): a query may take 5 s, a row lock
may be waited for 10 s.

Both bounds hold for the stock allocation, whose one statement waits for the products' row
locks: a statement's timeout covers its lock waits, so the allocation's is the two together
(``allocation_statement_timeout_s``), and a lock waited for ends at the lock timeout (ADR 0001),
not at the statement timeout every other statement has.
"""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from saga_contracts.registry import superseding_types
from sagakit.twins import versions_setting

ORDEN_SOLICITADA_VERSIONS = tuple(superseding_types("OrdenSolicitada"))
PRECIO_RECHAZADO_VERSIONS = tuple(superseding_types("PrecioRechazado"))


class InventarioSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INVENTARIO_", extra="ignore")

    # During a breaking change's transition pedidos may publish both versions of the event that
    # starts a saga; each consumer moves to the new one when it is ready
    # (docs/operations.md#evolving-an-event-schema).
    reads_orden_solicitada: str = Field("OrdenSolicitada", description=(
        "Which versions of the event that starts a saga inventario handles, comma-separated: "
        "`OrdenSolicitada`, `OrdenSolicitada_v4` or both; the others are skipped. With both, "
        "a saga published in both is checked once, on the first that comes."))

    # PrecioRechazado_v2 writes PrecioRechazado's problem codes in English: inventario
    # publishes both while pedidos, and any other reader, moves to it.
    publishes_precio_rechazado: str = Field("PrecioRechazado_v2,PrecioRechazado", description=(
        "Which versions of the price refusal inventario publishes, comma-separated, each in "
        "the same commit: `PrecioRechazado` (problem codes in Spanish), `PrecioRechazado_v2` "
        "(in English) or both. A consumer handles a saga's once, whichever version it reads "
        "first: list first the one its consumers read."))

    lock_timeout_s: float = Field(10.0, gt=0, le=60, description=(
        "Longest the stock allocation waits for a product's row lock; past it the attempt fails "
        "and is retried with backoff, then dead-lettered."))
    statement_timeout_s: float = Field(5.0, gt=0, le=60, description=(
        "PostgreSQL statement_timeout of every connection of inventario. The stock "
        "allocation's transaction has this plus INVENTARIO_LOCK_TIMEOUT_S, so that its lock "
        "waits end at the lock timeout."))

    reservation_ttl_s: float = Field(120.0, gt=0, le=86_400, description=(
        "How long a reserve_then_pay validation holds the units for its saga (from the "
        "database clock at the reservation). At least pedidos' PEDIDOS_VALIDATION_TIMEOUT_S "
        "plus PEDIDOS_PAYMENT_TIMEOUT_S plus 30 s (deploy/configuration.py checks it): pedidos "
        "ends a reserving saga's payment step 30 s before its reservation at the latest, "
        "so a shorter TTL cuts that step short."))
    auto_reserve_ratio: float = Field(0.5, gt=0, le=10, description=(
        "The auto strategy reserves when the units of Check-Then-Pay orders in flight (verified "
        "within the reservation TTL, neither allocated nor reserved) plus the order's reach "
        "this share of the product's available units; asked again under the product's lock at "
        "the commit. At most 1 for no race lost in a burst (docs/allocation-strategies.md)."))
    reservation_expiry_interval_s: float = Field(5.0, gt=0, le=300, description=(
        "Longest the reservation expiry job sleeps between two runs; it wakes sooner for the "
        "earliest deadline."))

    @field_validator("reads_orden_solicitada")
    @classmethod
    def _known_versions(cls, value: str) -> str:
        return ",".join(versions_setting(value, ORDEN_SOLICITADA_VERSIONS))

    @field_validator("publishes_precio_rechazado")
    @classmethod
    def _known_refusal_versions(cls, value: str) -> str:
        return ",".join(versions_setting(value, PRECIO_RECHAZADO_VERSIONS))

    @property
    def precio_rechazado_versions(self) -> list[str]:
        """``INVENTARIO_PUBLISHES_PRECIO_RECHAZADO`` as a list, in its order."""
        return self.publishes_precio_rechazado.split(",")

    @property
    def orden_solicitada_versions(self) -> list[str]:
        """``INVENTARIO_READS_ORDEN_SOLICITADA`` as a list."""
        return self.reads_orden_solicitada.split(",")

    @property
    def allocation_statement_timeout_s(self) -> float:
        """The allocation's statement timeout: its lock waits and its own work."""
        return self.lock_timeout_s + self.statement_timeout_s

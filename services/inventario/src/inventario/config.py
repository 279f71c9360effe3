"""inventario settings (Part II §5.4): a query may take 5 s, a row lock may be waited for 10 s."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class InventarioSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INVENTARIO_", extra="ignore")

    lock_timeout_s: float = Field(10.0, gt=0, le=60, description=(
        "Longest the stock allocation waits for a product's row lock; past it the attempt fails "
        "and is retried with backoff, then dead-lettered."))
    statement_timeout_s: float = Field(5.0, gt=0, le=60, description=(
        "PostgreSQL statement_timeout of every connection of inventario."))

"""Where a service finds the schema registry and who it is to it (``sagakit.schema_registry``)."""

from __future__ import annotations

from typing import Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from saga_contracts.schema_artifacts import GROUP


class SchemaRegistrySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SCHEMA_REGISTRY_", extra="ignore")

    url: str | None = Field(None, description=(
        "Apicurio Registry's REST API (`…/apis/registry/v3`): the service validates the "
        "events it handles against the schemas registered there and refuses to start unless "
        "every version it produces is registered. Unset: the schemas of the contracts' "
        "package, as the service's start logs (unit tests and tools only: the local stack, "
        "compose and Kubernetes set it)."))
    username: str | None = Field(None, description=(
        "The registry principal the service reads as (the stack's `reader`, Apicurio's "
        "read-only role), by HTTP basic authentication."))
    password: SecretStr | None = Field(None, description=(
        "Password of `SCHEMA_REGISTRY_USERNAME`; never logged."))
    group: str = Field(GROUP, min_length=1, description=(
        "The registry's group holding the event schemas, one artifact per event type and "
        "MAJOR (docs/adr/0014-the-schema-registry-is-apicurio.md)."))
    timeout_s: float = Field(2.0, gt=0, le=30, description=(
        "Longest one request to the registry may take. A version a consumer has not cached is "
        "fetched once, bounded by this; after a request that failed the registry is not asked "
        "again for a backoff (1 s doubling to 30 s), so a registry that hangs costs a partition "
        "at most this once per backoff."))
    start_timeout_s: float = Field(120.0, gt=0, le=3600, description=(
        "How long a starting service waits for the registry to answer and to hold every "
        "version it produces (a deployment registers them beside it) before it refuses to "
        "start, naming what is missing."))

    @field_validator("url")
    @classmethod
    def _no_blank(cls, url: str | None) -> str | None:
        if url is None or not url.strip():
            return None
        if urlsplit(url.strip()).username is not None:
            # Said without the URL: it would quote the password.
            raise ValueError("give the credentials in SCHEMA_REGISTRY_USERNAME and "
                             "SCHEMA_REGISTRY_PASSWORD, not in the URL")
        return url.strip().rstrip("/")

    @model_validator(mode="after")
    def _credentials_together(self) -> Self:
        if (self.username is None) != (self.password is None):
            raise ValueError("SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD go together")
        return self

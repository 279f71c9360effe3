"""The event schemas as the schema registry holds them (docs/standard.md#schema-registry,
docs/adr/0014-the-schema-registry-is-apicurio.md): ``settings`` (where the registry is, who
the service is to it), ``client`` (the reads), ``schemas`` (the cache the consumer validates
against) and ``startup`` (the start: the cache warmed, a service refused when a version it
produces is not registered)."""

from sagakit.schema_registry.client import RegistryClient, RegistryReads, RegistryUnavailable
from sagakit.schema_registry.schemas import Schema, Schemas, UnknownSchema
from sagakit.schema_registry.settings import SchemaRegistrySettings
from sagakit.schema_registry.startup import RefusedToStart, open_schemas, produced_by

__all__ = ["RefusedToStart", "RegistryClient", "RegistryReads", "RegistryUnavailable", "Schema",
           "SchemaRegistrySettings", "Schemas", "UnknownSchema", "open_schemas", "produced_by"]

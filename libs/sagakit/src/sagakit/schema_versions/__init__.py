"""Which schema versions a service produces and consumes, and which of them the schema registry
marks deprecated: the standard's deprecation policy (docs/operations.md#evolving-an-event-schema)
as each service sees it. ``use``: the metric, the warnings and the last use of each version;
``deprecations``: what the registry says; ``last_seen``: the last uses kept in the service's
database, where ``sagactl schemas retire`` reads them."""

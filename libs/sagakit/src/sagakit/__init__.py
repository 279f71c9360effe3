"""Saga messaging plumbing shared by the services.

Only infrastructure lives here. No order, stock or payment concept belongs in this package:
a service names its own metrics, reasons and rules, and hands sagakit only what is generic
(its subscriptions, jobs, tables, a hook that creates its metrics' series).

- ``store``: a service's PostgreSQL side (engine, driver, messaging tables, unit of work).
- ``outbox``: the relay that publishes what units of work committed.
- ``consumer``: the consumer loop and the ``Subscription`` a service declares its handlers with.
- ``runtime``: the app factory, the service definition, periodic jobs, operational endpoints.
- ``observability``: metrics, tracing, structured logging, privacy.
- ``auth``: bearer tokens verified against the identity provider, and the roles routes require.
- ``operations``: what operators do to a running saga (replaying dead letters).
- Modules at the top: what those share (envelope, event builder, dead-letter format, errors,
  ids, JSON, backoff, context, Kafka clients, messaging settings, the unit-of-work port and its
  fake) and the seams plugins may wrap (``plugins``).

The public surface, all a service imports (the import-linter contract in pyproject.toml holds
the services to it, ``make lint``): the modules at the top; each subpackage as a package (what
its ``__init__`` exports: ``sagakit.store``, ``sagakit.runtime``, ``sagakit.consumer``,
``sagakit.auth``, ``sagakit.operations``); and by name ``sagakit.store.driver`` and
``sagakit.observability``'s ``metrics``, ``tracing``, ``privacy`` and ``structured_logging``.
A service's migration scripts also use ``sagakit.store.migrations`` and
``sagakit.store.alembic_env``. Every other module is sagakit's own, free to change.
"""

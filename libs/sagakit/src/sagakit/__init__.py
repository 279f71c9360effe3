"""Saga messaging plumbing shared by the services.

Only infrastructure lives here. No order, stock or payment concept belongs in this package.

- ``store``: a service's PostgreSQL side (engine, driver, messaging tables, unit of work).
- ``outbox``: the relay that publishes what units of work committed.
- ``consumer``: the consumer loop and the ``Subscription`` a service declares its handlers with.
- ``runtime``: the app factory, the service definition, periodic jobs, operational endpoints.
- ``observability``: metrics, tracing, structured logging, privacy.
- Modules at the top: what those share (envelope, event builder, dead-letter format, errors,
  ids, JSON, backoff, context, Kafka clients, messaging settings, the unit-of-work port and its
  fake) and the fault injection of the crash and chaos suites (``faults``).
"""

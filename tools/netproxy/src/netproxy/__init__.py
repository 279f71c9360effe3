"""A TCP proxy that injects network faults (latency, black holes, refusals, resets) between a
service and PostgreSQL, Kafka or the payment gateway: ``proxy`` is the proxy, ``layout`` its
ports in the local stack, ``control`` the stack part with its HTTP API."""

"""A TCP proxy that injects network faults (latency, black holes, refusals, resets, HTTP answers
that are not the target's) between a service and PostgreSQL, Kafka or the payment gateway:
``proxy`` is the proxy, ``replies`` the answers it gives in the target's place, ``layout`` its
ports in the local stack, ``control`` the stack part with its HTTP API."""

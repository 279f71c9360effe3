"""The local stack without Docker: PostgreSQL, Kafka (KRaft), the fake gateway and the services,
each a process of its own, driven by ``python -m local_stack`` (``local_stack.cli``)."""

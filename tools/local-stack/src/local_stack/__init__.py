"""The local stack without Docker: PostgreSQL, Kafka (KRaft), the fake gateway and the services,
each a process of its own, driven by ``python deploy/local/stack.py`` (``local_stack.cli``)."""

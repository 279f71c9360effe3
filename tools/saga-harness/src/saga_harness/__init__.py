"""Test harness shared by every test suite of the workspace: it talks to the running stack
through its public interfaces (HTTP, Kafka) and reads the databases only to assert on them.
Its pytest plugin (``saga_harness.plugin``) gives tests the ``running_stack`` and ``saga``
fixtures."""

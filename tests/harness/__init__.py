"""Test harness for the end-to-end suite: it talks to the running stack through its public
interfaces (HTTP, Kafka) and reads the databases only to assert on them."""

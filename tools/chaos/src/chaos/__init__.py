"""Chaos suite: drive orders with contention, kill and pause parts of the stack, heal, and check
the system-wide invariants of the saga."""

"""Ports for processes and proxy routes a test starts of its own."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port nobody listens on now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])

"""Whether a part answers: a TCP port accepts connections, an HTTP health check says 2xx."""

from __future__ import annotations

import socket
import urllib.request


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex((host, port)) == 0


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            return bool(200 <= resp.status < 300)
    except Exception:
        return False

"""Whether a part answers: a TCP port accepts connections, an HTTP health check says 2xx."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any


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


def http_json(url: str) -> dict[str, Any] | None:
    """The JSON object a health check answers, whatever its status (a 503 says why); None when
    nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            body = resp.read()
    except urllib.error.HTTPError as refused:
        body = refused.read()
    except Exception:
        return None
    try:
        found = json.loads(body)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None

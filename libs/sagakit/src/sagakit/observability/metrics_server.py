"""The metrics-only HTTP server: Prometheus' text format on a port of its own, with no token.

``/metrics`` on the API port answers operators only, so a scrape there needs an operator's
token, which expires (and then every scrape fails and every alert goes quiet) and which can do
everything an operator can. This server serves nothing but the metrics, on an address only
Prometheus reaches: loopback locally, the project's private network in compose, and in
Kubernetes a port that the NetworkPolicy opens to the monitoring namespace's Prometheus only
(docs/operations.md, "Metrics and scraping").
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server

log = logging.getLogger("sagakit.metrics")


@dataclass
class MetricsServer:
    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def start(host: str, port: int) -> MetricsServer | None:
    """Serves the process' metrics on ``host:port`` in a thread of its own (the event loop's
    stalls do not delay a scrape); ``port`` 0 starts none. A port already taken raises: the
    process would otherwise run unscraped."""
    if port == 0:
        return None
    server, thread = start_http_server(port, addr=host)
    log.info("metrics on %s:%s", host, port)
    return MetricsServer(server, thread)

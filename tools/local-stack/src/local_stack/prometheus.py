"""Prometheus scraping the services, when it is installed and asked for (``--prometheus``)."""

from __future__ import annotations

import os
import shutil

from local_stack.console import log
from local_stack.probes import http_ok
from local_stack.processes import alive, read_pid, spawn, wait_for
from local_stack.settings import PROMETHEUS_PORT, ROOT, STATE


def start_prometheus() -> None:
    binary = shutil.which("prometheus")
    if not binary or alive(read_pid("prometheus")):
        return
    data = STATE / "prometheus"
    data.mkdir(parents=True, exist_ok=True)
    log(f"starting Prometheus on 127.0.0.1:{PROMETHEUS_PORT}")
    spawn("prometheus", [binary, f"--config.file={ROOT / 'deploy/prometheus/prometheus.yml'}",
                         f"--storage.tsdb.path={data}",
                         f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}"], dict(os.environ))
    wait_for("Prometheus", lambda: http_ok(f"http://127.0.0.1:{PROMETHEUS_PORT}/-/ready"), 30,
             "prometheus")

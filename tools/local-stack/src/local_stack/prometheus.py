"""Prometheus scraping the services, when it is installed and asked for (``--prometheus``).

It scrapes every instance's metrics-only port (``METRICS_PORT``, loopback only), which answers
without a token: the configuration this renders from deploy/prometheus/prometheus.yml names
one target per instance."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from local_stack.console import log
from local_stack.probes import http_ok
from local_stack.processes import alive, read_pid, spawn, wait_for
from local_stack.settings import PROMETHEUS_PORT, REPLICAS, ROOT, SERVICE_PORTS, STATE, metrics_port

TEMPLATE = ROOT / "deploy/prometheus/prometheus.yml"


TARGETS = "    static_configs:\n"


def targets(replicas: int = REPLICAS) -> list[dict[str, Any]]:
    """One static target group per service: the metrics ports of all its instances."""
    return [{"targets": [f"127.0.0.1:{metrics_port(service, k)}"
                         for k in range(1, replicas + 1)],
             "labels": {"service": service}} for service in SERVICE_PORTS]


def render_config(folder: Path, replicas: int = REPLICAS) -> Path:
    """deploy/prometheus/prometheus.yml written into ``folder``, its rule file given as an
    absolute path (Prometheus reads relative ones from the folder of the configuration) and
    its targets (the last part of the file) the stack's instances."""
    text = TEMPLATE.read_text()
    for marker in ("- alerts.yml", TARGETS):
        if text.count(marker) != 1:
            raise RuntimeError(f"{TEMPLATE} no longer has `{marker.strip()}` once")
    text = text.replace("- alerts.yml", f"- {TEMPLATE.parent / 'alerts.yml'}")
    # JSON is YAML: each group on one line, in flow style.
    groups = "".join(f"      - {json.dumps(group)}\n" for group in targets(replicas))
    text = text[:text.index(TARGETS) + len(TARGETS)] + groups
    folder.mkdir(parents=True, exist_ok=True)
    rendered = folder / "prometheus.yml"
    rendered.write_text(text)
    return rendered


def start_prometheus() -> None:
    binary = shutil.which("prometheus")
    if not binary or alive(read_pid("prometheus")):
        return
    data = STATE / "prometheus"
    data.mkdir(parents=True, exist_ok=True)
    config = render_config(data)
    log(f"starting Prometheus on 127.0.0.1:{PROMETHEUS_PORT}")
    spawn("prometheus", [binary, f"--config.file={config}",
                         f"--storage.tsdb.path={data}",
                         f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}"], dict(os.environ))
    wait_for("Prometheus", lambda: http_ok(f"http://127.0.0.1:{PROMETHEUS_PORT}/-/ready"), 30,
             "prometheus")

"""Prometheus scraping the services, when it is installed and asked for (``--prometheus``).

The services' /metrics is for operators: Prometheus sends an operator token from the stack's
identity provider, written beside the configuration this renders from
deploy/prometheus/prometheus.yml."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from local_stack import identity
from local_stack.console import log
from local_stack.probes import http_ok
from local_stack.processes import alive, read_pid, spawn, wait_for
from local_stack.settings import PROMETHEUS_PORT, ROOT, STATE

TEMPLATE = ROOT / "deploy/prometheus/prometheus.yml"


def render_config(folder: Path, token_file: Path) -> Path:
    """deploy/prometheus/prometheus.yml written into ``folder``, its rule file and its scrape
    token's file given as absolute paths (Prometheus reads relative ones from the folder of
    the configuration)."""
    text = TEMPLATE.read_text()
    for relative, absolute in (("- alerts.yml", f"- {TEMPLATE.parent / 'alerts.yml'}"),
                               ("credentials_file: scrape-token",
                                f"credentials_file: {token_file}")):
        if relative not in text:
            raise RuntimeError(f"{TEMPLATE} no longer has `{relative}`")
        text = text.replace(relative, absolute)
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
    token = identity.write_scrape_token(data / "scrape-token")
    config = render_config(data, token)
    log(f"starting Prometheus on 127.0.0.1:{PROMETHEUS_PORT}")
    spawn("prometheus", [binary, f"--config.file={config}",
                         f"--storage.tsdb.path={data}",
                         f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}"], dict(os.environ))
    wait_for("Prometheus", lambda: http_ok(f"http://127.0.0.1:{PROMETHEUS_PORT}/-/ready"), 30,
             "prometheus")

"""A Prometheus of the test's own: fresh storage, the project's alert rules (their `for:` in
seconds instead of minutes), scraping and evaluating every second, so an alert reflects only
what the test did."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from saga_harness import config
from saga_harness.waiting import wait_for

PORT = 9091


class Prometheus:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def firing(self) -> list[dict[str, Any]]:
        r = await self.http.get(f"http://127.0.0.1:{PORT}/api/v1/alerts")
        r.raise_for_status()
        return [a for a in r.json()["data"]["alerts"] if a["state"] == "firing"]

    async def value(self, query: str) -> float | None:
        r = await self.http.get(f"http://127.0.0.1:{PORT}/api/v1/query", params={"query": query})
        r.raise_for_status()
        result = r.json()["data"]["result"]
        return float(result[0]["value"][1]) if result else None


@contextlib.asynccontextmanager
async def running() -> AsyncIterator[Prometheus]:
    binary = shutil.which("prometheus")
    if binary is None:  # fail, never skip: make bootstrap installs Debian's prometheus
        raise RuntimeError("prometheus is not installed (make bootstrap installs it)")
    ports = list(config.METRICS.values())
    with tempfile.TemporaryDirectory(prefix="saga-prom-") as tmp:
        # The project's rules, each `for:` of N minutes made N seconds: a test sees an alert
        # fire within its deadlines (promtool's cases check the real durations).
        rules = (config.ROOT / "deploy/prometheus/alerts.yml").read_text()
        (Path(tmp) / "alerts.yml").write_text(
            re.sub(r"^(\s+for: \d+)m$", r"\1s", rules, flags=re.M))
        # The services' metrics-only ports, as every deployment scrapes them: no token, and
        # each target labelled with its service (the rules' `up{service=...}` need it).
        groups = ", ".join(f'{{targets: ["{url.removeprefix("http://")}"], '
                           f"labels: {{service: {service}}}}}"
                           for service, url in config.METRICS.items())
        (Path(tmp) / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "rule_files: [alerts.yml]\n"
            f"scrape_configs: [{{job_name: saga, static_configs: [{groups}]}}]\n")
        proc = await asyncio.create_subprocess_exec(
            binary, f"--config.file={tmp}/prometheus.yml", f"--storage.tsdb.path={tmp}/data",
            f"--web.listen-address=127.0.0.1:{PORT}",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                prom = Prometheus(http)

                async def scraped() -> float | None:
                    with contextlib.suppress(httpx.HTTPError):
                        return await prom.value("count(up == 1)")
                    return None
                await wait_for(scraped, lambda n: n == len(ports), timeout=30,
                               what="Prometheus scraping the three services")
                yield prom
        finally:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()

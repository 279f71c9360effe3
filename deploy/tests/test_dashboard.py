"""The Grafana dashboard only queries metrics the services really expose."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY

from sagakit.observability import metrics  # noqa: F401  (registers the metrics)

ROOT = Path(__file__).resolve().parents[2]


def _exposed() -> set[str]:
    names = set()
    for family in REGISTRY.collect():
        names.add(family.name)
        for sample in family.samples:
            names.add(sample.name)
    for metric in REGISTRY._names_to_collectors:  # counters register their _total names here
        names.add(metric)
    return names


def test_every_panel_queries_existing_metrics() -> None:
    dash = json.loads((ROOT / "deploy/grafana/saga-dashboard.json").read_text())
    exposed = _exposed()
    used = set()
    for panel in dash["panels"]:
        for target in panel["targets"]:
            used |= {m for m in re.findall(r"[a-z_]+(?:_total|_seconds|_messages|_lag|_ratio|"
                                           r"_active|_bucket)\b", target["expr"])}
    assert used, "the dashboard queries nothing"
    missing = {m for m in used if m not in exposed and m.removesuffix("_bucket") not in exposed}
    assert missing == set()
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("throughput", "duration", "outcomes", "outbox", "dead letters",
                  "compensations"):
        assert topic in titles

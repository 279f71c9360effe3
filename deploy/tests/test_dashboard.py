"""The Grafana dashboard only queries metrics the services really expose, and the published read
views (`<service>_read.*_v1`) through the data source of the grafana_reader login;
tests/e2e/test_dashboard_views.py runs those queries as that role."""

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
            if "expr" not in target:
                continue
            used |= {m for m in re.findall(r"[a-z_]+(?:_total|_seconds|_messages|_lag|_ratio|"
                                           r"_active|_bucket)\b", target["expr"])}
    assert used, "the dashboard queries nothing"
    missing = {m for m in used if m not in exposed and m.removesuffix("_bucket") not in exposed}
    assert missing == set()
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("throughput", "duration", "outcomes", "outbox", "dead letters",
                  "compensations", "5xx", "503", "429"):
        assert topic in titles


DASHBOARD = ROOT / "deploy/grafana/saga-dashboard.json"
DATASOURCE = ROOT / "deploy/grafana/saga-views-datasource.yaml"
VIEW = re.compile(r"^(pedidos|inventario|pagos)_read\.[a-z_]+_v\d+$")


def sql_queries() -> dict[str, str]:
    """Each SQL panel's title and query."""
    dash = json.loads(DASHBOARD.read_text())
    return {p["title"]: t["rawSql"] for p in dash["panels"] for t in p["targets"]
            if "rawSql" in t}


def test_the_sql_panels_read_only_published_views_through_the_readers_data_source() -> None:
    import yaml

    (source,) = yaml.safe_load(DATASOURCE.read_text())["datasources"]
    assert source["user"] == "grafana_reader" and "password" not in source
    assert source["secureJsonData"]["password"].startswith("$")  # from the environment
    dash = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["views"]["query"] == source["type"]
    queries = sql_queries()
    for wanted in ("payments needing action", "dead letters", "outbox backlog"):
        assert any(wanted in title.lower() for title in queries), wanted
    for title, sql in queries.items():
        relations = re.findall(r"\b(?:FROM|JOIN)\s+([\w.]+)", sql, re.I)
        assert relations, title
        assert all(VIEW.match(r) for r in relations), (title, relations)
    for panel in dash["panels"]:
        kinds = {t.get("datasource", panel["datasource"])["uid"] for t in panel["targets"]}
        assert kinds == ({"${views}"} if any("rawSql" in t for t in panel["targets"])
                         else {"${datasource}"}), panel["title"]

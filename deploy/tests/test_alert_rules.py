"""The alert rules: the standard's five (docs/standard.md#alerts) and the project's, checked and unit-tested
with promtool; each with a `for:`, a description and a runbook in docs/operations.md; tested on
series labelled as the Prometheus Operator labels them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from local_stack.prometheus import render_config

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/prometheus/alerts.yml"
# Only in the PrometheusRule: alerts on Kafka's and CloudNativePG's exporters.
CLUSTER_RULES = ROOT / "deploy/prometheus/alerts.cluster.yml"
CLUSTER = {"KafkaMetricsAbsent": "high", "PostgresMetricsAbsent": "high",
           "PostgresInstanceDown": "critical"}
MANDATORY = {"SagaFailureRateHigh": "critical", "SagaDurationAboveBaseline": "medium",
             "DeadLetterQueueGrowing": "high", "OutboxMessagesStuck": "critical",
             "SagaNearTimeout": "high"}


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: deploy/local/bootstrap.sh installs Debian's prometheus"
    return found


@pytest.mark.external
def test_rules_are_valid() -> None:
    res = subprocess.run([_promtool(), "check", "rules", str(RULES), str(CLUSTER_RULES)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.external
def test_each_cluster_alert_fires_when_it_should_and_only_then() -> None:
    res = subprocess.run([_promtool(), "test", "rules", "alerts.cluster.test.yml"],
                         cwd=RULES.parent, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    tests = _tests("alerts.cluster.test.yml")
    for alert in CLUSTER:
        cases = [c for t in tests for c in t["alert_rule_test"] if c["alertname"] == alert]
        assert any(c["exp_alerts"] for c in cases), f"{alert}: no case where it fires"
        assert any(not c["exp_alerts"] for c in cases), f"{alert}: no case where it stays quiet"


@pytest.mark.external
def test_each_mandatory_alert_fires_when_it_should_and_only_then() -> None:
    res = subprocess.run([_promtool(), "test", "rules", "alerts.test.yml"],
                         cwd=RULES.parent, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    tests = yaml.safe_load((RULES.parent / "alerts.test.yml").read_text())["tests"]
    for alert in MANDATORY | OWN:
        cases = [c for t in tests for c in t["alert_rule_test"] if c["alertname"] == alert]
        assert any(c["exp_alerts"] for c in cases), f"{alert}: no case where it fires"
        assert any(not c["exp_alerts"] for c in cases), f"{alert}: no case where it stays quiet"


# Beyond the standard's five: payments waiting for a person, stock allocated for a saga being
# refunded, payment events that are not their saga's payment, payment tokens sealed for another
# charge, replays the operator did not sign, refunds pagos refused because they were not the
# saga's to make, an instance that cannot reach its database, a deprecated schema version still
# in use, an instance the schema registry does not answer; scrapes that fail or find nothing
# (without them every other alert is silent); and the HTTP answers.
OWN = {"PaymentNeedsManualAction": "critical", "AllocationContradicted": "critical",
       "PaymentEventMismatch": "critical", "SealedTokenMismatch": "critical",
       "ForgedReplay": "critical", "RefundRefused": "critical",
       "DatabaseUnreachable": "critical", "MetricsTargetDown": "high",
       "ServiceMetricsAbsent": "critical", "HttpServerErrors": "critical",
       "HttpServiceUnavailable": "high", "HttpRequestsRateLimited": "medium",
       "DeprecatedSchemaVersionInUse": "medium", "SchemaRegistryUnreachable": "high"}
# What the Prometheus Operator labels a ServiceMonitor's target with.
OPERATOR_LABELS = {"job", "namespace", "pod", "service", "endpoint", "instance", "container"}
OPERATIONS = ROOT / "docs/operations.md"
RUNBOOKS = "## Alert runbooks"


def _rules(*files: Path) -> list[dict[str, Any]]:
    return [r for f in files or (RULES,) for g in yaml.safe_load(f.read_text())["groups"]
            for r in g["rules"]]


def _tests(*files: str) -> list[dict[str, Any]]:
    return [t for f in files or ("alerts.test.yml",)
            for t in yaml.safe_load((RULES.parent / f).read_text())["tests"]]


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def runbook_anchors() -> set[str]:
    """The anchors of the headings of docs/operations.md's "Alert runbooks" section."""
    text = OPERATIONS.read_text()
    assert RUNBOOKS in text, f"{OPERATIONS} has no section {RUNBOOKS!r}"
    section = text.split(RUNBOOKS, 1)[1].split("\n## ", 1)[0]
    return {_anchor(h) for h in re.findall(r"^### (.+)$", section, re.M)}


def test_every_alert_waits_says_what_it_means_and_links_its_runbook() -> None:
    anchors = runbook_anchors()
    for rule in _rules(RULES, CLUSTER_RULES):
        name = rule["alert"]
        assert re.fullmatch(r"\d+[smh]", str(rule.get("for", ""))), f"{name}: no for:"
        annotations = rule.get("annotations", {})
        assert annotations.get("summary") and len(annotations.get("description", "")) > 20, \
            f"{name}: no summary or description"
        page, _, anchor = annotations.get("runbook_url", "").partition("#")
        assert page == "docs/operations.md", f"{name}: runbook_url {page!r}"
        assert anchor == name.lower(), f"{name}: runbook anchor {anchor!r}"
        assert anchor in anchors, f"{name}: no runbook #{anchor} in {OPERATIONS.name}"


def test_the_runbook_check_sees_a_missing_anchor() -> None:
    assert "sagafailureratehigh" in runbook_anchors()
    assert "nosuchalert" not in runbook_anchors()


def test_every_alert_fires_on_series_labelled_as_the_operator_labels_them() -> None:
    """Each alert has a firing case whose series all carry the labels the Prometheus Operator
    gives a target (and the `service` of the service, not of the Kubernetes Service): its
    aggregation is checked on what a cluster's Prometheus stores."""
    def labels(series: str) -> set[str]:
        return set(re.findall(r'(\w+)="', series))
    tests = _tests("alerts.test.yml", "alerts.cluster.test.yml")
    for alert in MANDATORY | OWN | CLUSTER:
        cases = [t for t in tests for c in t["alert_rule_test"]
                 if c["alertname"] == alert and c["exp_alerts"]]
        assert any(all(OPERATOR_LABELS <= labels(s["series"]) for s in t["input_series"])
                   for t in cases), f"{alert}: no firing case with the operator's labels"


def test_severities_are_the_standards() -> None:
    assert {r["alert"]: r["labels"]["severity"] for r in _rules()} == MANDATORY | OWN
    assert {r["alert"]: r["labels"]["severity"] for r in _rules(CLUSTER_RULES)} == CLUSTER


@pytest.mark.external
def test_the_scrape_configuration_is_valid(tmp_path: Path) -> None:
    # As the local stack renders it, with two instances of each service.
    config = render_config(tmp_path, replicas=2)
    res = subprocess.run([_promtool(), "check", "config", str(config)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


# Alerts on gauges of the database's state, which every replica of a service reports alike.
PER_DATABASE = ("DeadLetterQueueGrowing", "OutboxMessagesStuck")


def test_database_state_alerts_are_tested_with_two_replicas() -> None:
    """Each has a promtool case whose series come from two instances of a service, firing and
    quiet at the same evaluation times as its one-replica case: the threshold is the same
    whatever the number of replicas (promtool checks the cases; this, that they exist)."""
    tests = yaml.safe_load((RULES.parent / "alerts.test.yml").read_text())["tests"]
    for alert in PER_DATABASE:
        def times(replicated: bool, alert: str = alert) -> set[tuple[str, bool]]:
            return {(c["eval_time"], bool(c["exp_alerts"])) for t in tests
                    for c in t["alert_rule_test"] if c["alertname"] == alert
                    and any("instance=" in s["series"] for s in t["input_series"]) == replicated}
        assert times(True), f"{alert}: no case with two replicas"
        assert times(True) == times(False), f"{alert}: two replicas fire at other times than one"

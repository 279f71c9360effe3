"""The standard's five mandatory alerts (Part I §8.3), checked and unit-tested with promtool."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from local_stack.prometheus import render_config

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/prometheus/alerts.yml"
MANDATORY = {"SagaFailureRateHigh": "critical", "SagaDurationAboveBaseline": "medium",
             "DeadLetterQueueGrowing": "high", "OutboxMessagesStuck": "critical",
             "SagaNearTimeout": "high"}


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: deploy/local/bootstrap.sh installs Debian's prometheus"
    return found


@pytest.mark.external
def test_rules_are_valid() -> None:
    res = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout + res.stderr


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


# Beyond the standard's five: payments the system gave up on, which a person must settle,
# payment events that are not their saga's payment, payment tokens sealed for another charge,
# replays the operator did not sign, refunds pagos refused because they were not the
# saga's to make, and an instance that cannot reach its database.
OWN = {"PaymentNeedsManualAction": "critical", "PaymentEventMismatch": "critical",
       "SealedTokenMismatch": "critical", "ForgedReplay": "critical",
       "RefundRefused": "critical", "DatabaseUnreachable": "critical"}


def test_severities_are_the_standards() -> None:
    rules = {r["alert"]: r for g in yaml.safe_load(RULES.read_text())["groups"]
             for r in g["rules"]}
    assert {name: r["labels"]["severity"] for name, r in rules.items()} == MANDATORY | OWN


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

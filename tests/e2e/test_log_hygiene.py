"""After the suite, every log line of the services is JSON with the mandatory saga fields, and
no payment token or address appears in clear (docs/standard.md#structured-logs)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from saga_harness.config import ROOT

pytestmark = pytest.mark.after_down

LOGS = Path(os.environ.get("SAGA_STATE_DIR", ROOT / ".local")) / "logs"
SERVICES = ("pedidos", "inventario", "pagos")
MANDATORY = ("saga_id", "event_type", "schema_version", "service", "timestamp", "span_id",
             "parent_span_id", "status", "duration_ms", "attempt")


def _lines(name: str) -> list[str]:
    path = LOGS / f"{name}.log"
    assert path.exists(), f"no log of {name}: did the suite run?"
    return [line for line in path.read_text(errors="replace").splitlines() if line.strip()]


@pytest.mark.parametrize("service", SERVICES)
def test_every_line_is_json_and_saga_lines_carry_the_mandatory_fields(service: str) -> None:
    saga_lines = 0
    for line in _lines(service):
        doc = json.loads(line)
        assert doc["service"] == service and doc["level"] in (
            "debug", "info", "warning", "error", "critical"), line
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", doc["timestamp"]), line
        if doc.get("saga_id"):
            saga_lines += 1
            assert all(k in doc for k in MANDATORY), (set(MANDATORY) - set(doc), line)
    assert saga_lines > 0


def test_no_payment_token_or_address_in_clear() -> None:
    leaks = []
    accepted_orders = 0
    for name in (*SERVICES, "gateway"):
        for line in _lines(name):
            if re.search(r"tok_[A-Za-z0-9]+|Siempre Viva|postal_code", line):
                leaks.append(line[:200])
            if '"order accepted"' in line:
                accepted_orders += 1
                order = json.loads(line)["order"]
                assert order["payment_method"]["token"] == "[MASKED]", line
                assert "shipping_address" not in order, line
    assert leaks == []
    assert accepted_orders > 0, "the orders were logged, with their sensitive fields hidden"

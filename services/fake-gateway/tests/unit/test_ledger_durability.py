"""The fake gateway's ledger keeps every answer it gave across a kill -9 of its process (the
fault the chaos and gateway-failure tests inject): a replayed idempotency key must find the
first answer, or a retried charge would charge twice."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from fake_gateway.ledger import Ledger

_WRITE_THEN_DIE = """
import os, signal, sys
from pathlib import Path
from fake_gateway.ledger import Ledger
ledger = Ledger(Path(sys.argv[1]))
ledger.idempotency_attempt("charges", "key-1", "fp")
charge = ledger.create_charge(amount=999, currency="usd", source="tok_visa",
                              status="succeeded", decline_code=None, idempotency_key="key-1",
                              metadata={})
ledger.remember("charges", "key-1", 200, charge)
print(charge["id"], flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint
"""


def test_an_answer_given_survives_a_kill_of_the_gateway(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    done = subprocess.run([sys.executable, "-c", _WRITE_THEN_DIE, str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    charge_id = done.stdout.strip()
    ledger = Ledger(path)
    try:
        record = ledger.idempotency_attempt("charges", "key-1", "fp")
        assert record["status_code"] == 200
        assert record["body"]["id"] == charge_id
        assert ledger.charge(charge_id) is not None
        assert json.dumps(ledger.snapshot()).count(charge_id) >= 1
    finally:
        ledger.close()

"""The post-install smoke Job's script (deploy/k8s/components/smoke/smoke.py) against a stand-in
for pedidos, inventario and the identity provider on the loopback: it passes only when the order
reaches COMPLETADA, and calls as the services want to be called (an operator stocks, a customer
orders), with tokens from the identity provider or from files."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from saga_harness import scripts

smoke = scripts.load("deploy/k8s/components/smoke/smoke.py", "k8s_smoke")


class StandIn(BaseHTTPRequestHandler):
    """Stocks anything, takes any order, and answers its status from ``statuses`` in turn
    (the last one for ever after); hands out ``tok-<sub>-<role>`` at /token."""

    statuses: ClassVar[list[str]] = []
    seen: ClassVar[list[tuple[str, str, Any]]] = []
    authorization: ClassVar[list[str | None]] = []

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        return json.loads(self.rfile.read(length)) if length else None

    def _record(self, method: str, body: Any) -> None:
        self.seen.append((method, self.path, body))
        self.authorization.append(self.headers.get("Authorization"))

    def do_PUT(self) -> None:
        self._record("PUT", self._body())
        self._answer(200, {"sku": self.path.rsplit("/", 1)[1], "quantity": 1})

    def do_POST(self) -> None:
        body = self._body()
        self._record("POST", body)
        if self.path == "/token":
            self._answer(200, {"access_token": f"tok-{body['sub']}-{body['roles'][0]}",
                               "token_type": "Bearer", "expires_in": body["expires_in"]})
            return
        self._answer(202, {"order_id": "o-1", "saga_id": "s-1",
                           "status": "PENDIENTE_VALIDACION"})

    def do_GET(self) -> None:
        self._record("GET", None)
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        self._answer(200, {"order_id": "o-1", "status": status})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stand_in() -> Iterator[str]:
    StandIn.seen = []
    StandIn.authorization = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _calls() -> list[tuple[str, str, Any, str | None]]:
    return [(m, p, b, a) for (m, p, b), a in zip(StandIn.seen, StandIn.authorization,
                                                 strict=True)]


def test_it_passes_when_the_order_completes_with_the_providers_tokens(stand_in: str) -> None:
    StandIn.statuses = ["PENDIENTE_PAGO", "PENDIENTE_ASIGNACION", "COMPLETADA"]
    assert smoke.main([stand_in, stand_in, "30", "--identity-provider", stand_in]) == 0
    calls = _calls()
    tokens = [c for c in calls if c[1] == "/token"]
    assert [t[2]["roles"] for t in tokens] == [["operator"], ["customer"]]
    customer = tokens[1][2]["sub"]
    rest = [c for c in calls if c[1] != "/token"]
    assert [(m, p.split("/")[1]) for m, p, _, _ in rest[:2]] == [("PUT", "products"),
                                                                 ("POST", "orders")]
    (_, put_path, stock, put_auth), (_, _, order, post_auth) = rest[:2]
    assert put_auth == "Bearer tok-saga-smoke-operator"
    # The catalog price the order pays: an order off the catalog is cancelled without a charge.
    assert (stock["price"], stock["currency"]) == (order["items"][0]["price"], order["currency"])
    assert order["items"][0]["sku"] == put_path.rsplit("/", 1)[1]
    assert order["payment_method"]["token"] == "tok_visa"
    assert "customer_id" not in order  # the customer token's subject
    assert post_auth == f"Bearer tok-{customer}-customer"
    assert {a for m, _, _, a in rest if m == "GET"} == {f"Bearer tok-{customer}-customer"}


def test_it_reads_its_tokens_from_files(stand_in: str, tmp_path: Path) -> None:
    (tmp_path / "operator").write_text("op-token\n")
    (tmp_path / "customer").write_text("cust-token\n")
    StandIn.statuses = ["COMPLETADA"]
    assert smoke.main([stand_in, stand_in, "30", "--tokens", str(tmp_path)]) == 0
    calls = _calls()
    assert not any(c[1] == "/token" for c in calls)
    assert [(m, a) for m, _, _, a in calls[:3]] == [
        ("PUT", "Bearer op-token"), ("POST", "Bearer cust-token"), ("GET", "Bearer cust-token")]


def test_it_needs_a_source_of_tokens(stand_in: str) -> None:
    with pytest.raises(SystemExit):
        smoke.main([stand_in, stand_in, "30"])
    assert StandIn.seen == []


def test_missing_token_files_are_named_before_any_call(stand_in: str, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="saga-smoke-tokens"):
        smoke.main([stand_in, stand_in, "30", "--tokens", str(tmp_path)])
    assert StandIn.seen == []


def test_it_fails_when_the_order_is_cancelled(stand_in: str) -> None:
    StandIn.statuses = ["CANCELADA_SIN_STOCK"]
    assert smoke.main([stand_in, stand_in, "30", "--identity-provider", stand_in]) == 1


def test_it_fails_when_the_deadline_passes(stand_in: str) -> None:
    StandIn.statuses = ["PENDIENTE_PAGO"]
    assert smoke.main([stand_in, stand_in, "1", "--identity-provider", stand_in]) == 1

"""The post-install smoke Job's script (deploy/k8s/components/smoke/smoke.py) against a stand-in
for pedidos and inventario on the loopback: it passes only when the order reaches COMPLETADA."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from saga_harness import scripts

smoke = scripts.load("deploy/k8s/components/smoke/smoke.py", "k8s_smoke")


class StandIn(BaseHTTPRequestHandler):
    """Stocks anything, takes any order, and answers its status from ``statuses`` in turn
    (the last one for ever after)."""

    statuses: ClassVar[list[str]] = []
    seen: ClassVar[list[tuple[str, str, Any]]] = []

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

    def do_PUT(self) -> None:
        self.seen.append(("PUT", self.path, self._body()))
        self._answer(200, {"sku": self.path.rsplit("/", 1)[1], "quantity": 1})

    def do_POST(self) -> None:
        self.seen.append(("POST", self.path, self._body()))
        self._answer(202, {"order_id": "o-1", "saga_id": "s-1",
                           "status": "PENDIENTE_VALIDACION"})

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, None))
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        self._answer(200, {"order_id": "o-1", "status": status})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stand_in() -> Iterator[str]:
    StandIn.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_it_passes_when_the_order_completes(stand_in: str) -> None:
    StandIn.statuses = ["PENDIENTE_PAGO", "PENDIENTE_ASIGNACION", "COMPLETADA"]
    assert smoke.main([stand_in, stand_in, "30"]) == 0
    methods = [(m, p.split("/")[1]) for m, p, _ in StandIn.seen]
    assert methods[:2] == [("PUT", "products"), ("POST", "orders")]
    order = StandIn.seen[1][2]
    assert order["payment_method"]["token"] == "tok_visa"
    assert order["items"][0]["sku"] == StandIn.seen[0][1].rsplit("/", 1)[1]


def test_it_fails_when_the_order_is_cancelled(stand_in: str) -> None:
    StandIn.statuses = ["CANCELADA_SIN_STOCK"]
    assert smoke.main([stand_in, stand_in, "30"]) == 1


def test_it_fails_when_the_deadline_passes(stand_in: str) -> None:
    StandIn.statuses = ["PENDIENTE_PAGO"]
    assert smoke.main([stand_in, stand_in, "1"]) == 1

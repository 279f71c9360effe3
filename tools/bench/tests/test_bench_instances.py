"""The benchmark counts every instance of a part (SAGA_REPLICAS, SAGA_KAFKA_BROKERS) as that
part, and spreads its orders over every pedidos instance."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.common import instance_pid_files
from bench.load import Pedidos


def test_every_instance_of_a_part_and_no_other_part(tmp_path: Path) -> None:
    for name in ("pedidos", "pedidos-2", "pedidos-10", "pedidos-x", "pagos", "kafka-3",
                 "kafka", "kafka-2"):
        (tmp_path / f"{name}.pid").write_text("1")
    assert [p.stem for p in instance_pid_files("pedidos", tmp_path)] == [
        "pedidos", "pedidos-2", "pedidos-10"]
    assert [p.stem for p in instance_pid_files("kafka", tmp_path)] == [
        "kafka", "kafka-2", "kafka-3"]
    assert instance_pid_files("inventario", tmp_path) == []


async def test_orders_go_to_each_pedidos_instance_in_turn(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGA_REPLICAS", "2")
    async with Pedidos(connections=4) as http:
        ports = [http.next()._port for _ in range(4)]
    assert ports[0] != ports[1] and ports[:2] == ports[2:]
    assert ports[1] - ports[0] == 100

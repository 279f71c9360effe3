"""The read contract's rules (saga_harness.read_contract.breaches), on descriptions made up for
the test, and the repository's readers found where they are."""

from __future__ import annotations

from pathlib import Path

from saga_harness import read_contract
from saga_harness.read_contract import breaches

V1 = [("saga_id", "uuid"), ("status", "text")]


def test_the_same_views_and_columns_keep_the_contract() -> None:
    assert breaches("pedidos", {"sagas_v1": V1}, {"sagas_v1": V1},
                    {("pedidos", "sagas_v1"): ["tools/x.py"]}) == []


def test_a_column_changed_breaks_it() -> None:
    changed = [("saga_id", "text"), ("status", "text")]
    [breach] = breaches("pedidos", {"sagas_v1": V1}, {"sagas_v1": changed}, {})
    assert "pedidos_read.sagas_v1" in breach and "new version" in breach


def test_a_column_added_breaks_it_too() -> None:
    [breach] = breaches("pedidos", {"sagas_v1": V1}, {"sagas_v1": [*V1, ("x", "int")]}, {})
    assert "new version" in breach


def test_a_view_gone_while_read_breaks_it_and_names_the_reader() -> None:
    [breach] = breaches("pedidos", {"sagas_v1": V1, "sagas_v2": V1}, {"sagas_v2": V1},
                        {("pedidos", "sagas_v1"): ["tools/sagactl/src/sagactl/reads.py"]})
    assert "sagas_v1 is gone" in breach and "tools/sagactl/src/sagactl/reads.py" in breach


def test_a_view_gone_that_no_one_reads_is_retired() -> None:
    assert breaches("pedidos", {"sagas_v1": V1, "sagas_v2": V1}, {"sagas_v2": V1},
                    {("pedidos", "sagas_v2"): ["tools/x.py"]}) == []


def test_a_view_published_without_a_description_breaks_it() -> None:
    [breach] = breaches("pagos", {}, {"payments_v1": V1}, {})
    assert "not described" in breach and '"payments_v1"' in breach


def test_a_reader_of_a_view_not_in_the_contract_breaks_it() -> None:
    [breach] = breaches("pagos", {}, {}, {("pagos", "payments_v9"): ["tools/x.py"]})
    assert "payments_v9" in breach and "tools/x.py" in breach


def test_readers_are_found_in_the_tools_the_services_and_the_dashboards(tmp_path: Path) -> None:
    (tmp_path / "tools/t/src/t").mkdir(parents=True)
    (tmp_path / "tools/t/src/t/reads.py").write_text(
        'Q = "SELECT * FROM pagos_read.payments_v1"\n'
        'E = f"SELECT 1 FROM {svc}_read.outbox_v1"\n')
    (tmp_path / "deploy/grafana").mkdir(parents=True)
    (tmp_path / "deploy/grafana/d.json").write_text('{"rawSql": "FROM pedidos_read.sagas_v1"}')
    (tmp_path / "services/pagos/migrations").mkdir(parents=True)
    (tmp_path / "services/pagos/migrations/m.py").write_text("pagos_read.payments_v0")
    found = read_contract.readers(tmp_path)
    assert found[("pagos", "payments_v1")] == ["tools/t/src/t/reads.py"]
    assert found[("pedidos", "sagas_v1")] == ["deploy/grafana/d.json"]
    assert {s for s, v in found if v == "outbox_v1"} == set(read_contract.SERVICES)
    assert ("pagos", "payments_v0") not in found, "a migration publishes, it does not read"


def test_every_view_the_repositorys_readers_use_is_described() -> None:
    read_by = read_contract.readers()
    assert ("pedidos", "sagas_v1") in read_by, "sagactl's reads were not found"
    for service in read_contract.SERVICES:
        described = read_contract.described(service)
        assert [b for b in breaches(service, described, described, read_by)] == []

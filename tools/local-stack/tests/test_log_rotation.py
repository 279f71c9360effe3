"""The local stack's logs stay bounded: a part's log past the limit is moved aside when the
part starts (one older generation kept), and a smaller one is appended to."""

from __future__ import annotations

from pathlib import Path

from local_stack.processes import open_log


def test_a_log_past_the_limit_is_moved_aside_when_its_part_starts(tmp_path: Path) -> None:
    (tmp_path / "pedidos.log").write_bytes(b"x" * 2048)
    (tmp_path / "pedidos.log.1").write_bytes(b"older")
    (tmp_path / "pagos.log").write_bytes(b"y" * 100)

    with open_log("pedidos", tmp_path, limit=1024) as f:
        f.write(b"new\n")
    with open_log("pagos", tmp_path, limit=1024) as f:
        f.write(b"more\n")
    with open_log("gateway", tmp_path, limit=1024) as f:
        f.write(b"first\n")

    assert (tmp_path / "pedidos.log").read_bytes() == b"new\n"
    assert (tmp_path / "pedidos.log.1").read_bytes() == b"x" * 2048
    assert (tmp_path / "pagos.log").read_bytes() == b"y" * 100 + b"more\n"
    assert not (tmp_path / "pagos.log.1").exists()
    assert (tmp_path / "gateway.log").read_bytes() == b"first\n"

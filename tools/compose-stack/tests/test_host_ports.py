"""Which host ports `up` checks before it starts anything: those docker-compose.yml will publish,
from the environment, else the env file, else the file's defaults (as podman-compose reads them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compose_stack import cli
from compose_stack.settings import DEFAULT_HOST_PORTS


def test_the_environment_wins_over_the_env_file_which_wins_over_the_defaults(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_file = tmp_path / "env"
    env_file.write_text("PEDIDOS_HOST_PORT=18001\nPAGOS_HOST_PORT=18003\nPG_ADMIN_PASSWORD=x\n")
    monkeypatch.setattr(cli, "ENV_FILE", env_file)
    monkeypatch.setattr(cli, "ENVIRONMENT_HOST_PORTS",
                        {**dict.fromkeys(DEFAULT_HOST_PORTS), "PAGOS_HOST_PORT": "28003"})
    ports = cli.host_ports()
    assert ports["PEDIDOS_HOST_PORT"] == 18001
    assert ports["PAGOS_HOST_PORT"] == 28003
    assert ports["GATEWAY_HOST_PORT"] == DEFAULT_HOST_PORTS["GATEWAY_HOST_PORT"]
    assert set(ports) == set(DEFAULT_HOST_PORTS)


def test_without_an_env_file_the_defaults(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "ENV_FILE", tmp_path / "missing")
    monkeypatch.setattr(cli, "ENVIRONMENT_HOST_PORTS", dict.fromkeys(DEFAULT_HOST_PORTS))
    assert cli.host_ports() == DEFAULT_HOST_PORTS

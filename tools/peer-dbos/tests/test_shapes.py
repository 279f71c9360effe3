"""The shapes' processes share the connection pools one process would have: a shape of N
processes holds no more connections than the single one (PostgreSQL's ``max_connections``
would refuse the rest once a deep closed loop fills every pool)."""

from __future__ import annotations

import pytest

from peer_dbos.__main__ import pools_of_each
from peer_dbos.settings import PeerSettings


@pytest.mark.parametrize("processes", [1, 2, 3, 8])
def test_the_processes_of_a_shape_hold_the_pools_of_one_between_them(processes: int) -> None:
    settings = PeerSettings(database_url="postgresql://u@127.0.0.1/db", gateway_secret_key="k",
                            system_pool_size=48, datasource_pool_size=47)
    each = pools_of_each(settings, processes)
    system = int(each["PEER_DBOS_SYSTEM_POOL_SIZE"])
    datasource = int(each["PEER_DBOS_DATASOURCE_POOL_SIZE"])
    # Rounded up, so that no process gets fewer than its share: at most one more each.
    assert 48 <= system * processes < 48 + processes
    assert 47 <= datasource * processes < 47 + processes
    assert system >= 1 and datasource >= 1

"""A consumer is ready once it is a member of its group, partitions or not."""

from __future__ import annotations

import asyncio

from sagakit.consumer.loop import _BeforeRebalance


async def test_a_consumer_that_joined_its_group_without_partitions_is_ready() -> None:
    """A replica beyond the partition count is given none; it is still a member of its group
    (ready to take partitions over), and /ready must say so."""
    joined = asyncio.Event()

    async def commit() -> None:
        return None

    await _BeforeRebalance(commit, joined.set).on_partitions_assigned([])
    assert joined.is_set()

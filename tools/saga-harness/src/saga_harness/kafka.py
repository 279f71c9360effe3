"""Raw Kafka access for tests that inject messages or read dead-letter topics."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from saga_contracts import registry
from saga_harness import config


def envelope(event_type: str, payload: dict[str, Any], *, saga_id: str | None = None,
             message_id: str | None = None, source: str = "test",
             schema_version: str | None = None) -> dict[str, Any]:
    """An event as a producer writes it; ``schema_version`` by default its type's latest
    (``1.0.0`` for a type the contract does not know)."""
    if schema_version is None:
        try:
            schema_version = registry.latest(event_type).version
        except registry.UnknownEventType:
            schema_version = "1.0.0"
    return {
        "message_id": message_id or str(uuid.uuid4()),
        "saga_id": saga_id or str(uuid.uuid4()),
        "span_id": str(uuid.uuid4()),
        "parent_span_id": None,
        "schema_version": schema_version,
        "timestamp": "2026-11-29T10:30:00.000000Z",
        "source_service": source,
        "event_type": event_type,
        "payload": payload,
        "metadata": {},
    }


async def produce(topic: str, value: bytes | dict[str, Any], *, key: str | None = None,
                  headers: dict[str, str] | None = None, times: int = 1,
                  principal: str | None = None) -> None:
    """Writes ``value`` to ``topic`` (keyed by its saga id unless ``key`` says otherwise),
    as ``principal`` (a service's Kafka user: what a process holding its credentials can
    write) on a stack whose Kafka authenticates; as the tests' usual client otherwise."""
    client = config.kafka_client(principal if config.KAFKA_AUTH else None)
    producer = AIOKafkaProducer(**client, acks="all")
    await producer.start()
    try:
        data = value if isinstance(value, bytes) else json.dumps(value).encode()
        if key is None and isinstance(value, dict):
            key = value.get("saga_id")
        for _ in range(times):
            await producer.send_and_wait(
                topic, data, key=key.encode() if key else None,
                headers=[(k, v.encode()) for k, v in (headers or {}).items()])
    finally:
        await producer.stop()


async def partitions_of(topic: str) -> list[int]:
    admin = AIOKafkaAdminClient(**config.kafka_client())
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    return sorted(p["partition"] for p in described[0]["partitions"])


@dataclass(frozen=True)
class GroupMember:
    """A member of a consumer group as its coordinator describes it: what it subscribed to and
    the partitions it was assigned (empty while the group rebalances)."""

    member_id: str
    subscription: tuple[str, ...]
    assigned: frozenset[tuple[str, int]]


def group_members(described: Any) -> tuple[str, list[GroupMember]]:
    """The state (``Stable``, ``PreparingRebalance``...) and members of the one group of a
    ``DescribeGroups`` response (versions 0 to 3, the ones aiokafka asks for, lay a group and
    a member out alike)."""
    group = described.groups[0]
    state, members = group[2], group[5]
    out = []
    for member in members:
        metadata, assignment = member[3], member[4]
        subscription = (tuple(ConsumerProtocolMemberMetadata.decode(metadata).subscription)
                        if metadata else ())
        assigned = (frozenset((tp.topic, tp.partition) for tp in
                              ConsumerProtocolMemberAssignment.decode(assignment).partitions())
                    if assignment else frozenset())
        out.append(GroupMember(member[0], subscription, assigned))
    return state, out


async def consumer_group(group_id: str) -> tuple[str, list[GroupMember]]:
    """The state and members of the consumer group ``group_id`` (a service's group is named
    after the service), as its coordinator sees them now."""
    admin = AIOKafkaAdminClient(**config.kafka_client())
    await admin.start()
    try:
        return group_members((await admin.describe_consumer_groups([group_id]))[0])
    finally:
        await admin.close()


class TopicReader:
    """Reads a topic from the offsets it had when the reader was opened."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.consumer = AIOKafkaConsumer(**config.kafka_client(), enable_auto_commit=False,
                                         group_id=None)
        self.records: list[Any] = []

    async def __aenter__(self) -> TopicReader:
        await self.consumer.start()
        partitions = await partitions_of(self.topic)
        if not partitions:
            raise AssertionError(f"topic {self.topic} has no partitions")
        tps = [TopicPartition(self.topic, p) for p in partitions]
        self.consumer.assign(tps)
        await self.consumer.seek_to_end(*tps)
        for tp in tps:  # resolve the end offsets now, before the test acts
            await self.consumer.position(tp)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def wait_until(self, done: Callable[[list[Any]], bool], timeout: float = 15) -> None:
        """Reads until ``done`` holds for every record read so far."""
        deadline = time.monotonic() + timeout
        while not done(self.records):
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.topic}: condition not met within {timeout}s "
                                     f"({len(self.records)} records read)")
            batch = await self.consumer.getmany(timeout_ms=200)
            for records in batch.values():
                self.records.extend(records)

    async def wait_for(self, accept: Callable[[Any], bool], timeout: float = 15) -> Any:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for rec in self.records[seen:]:
                if accept(rec):
                    return rec
            seen = len(self.records)
            if time.monotonic() > deadline:
                break
            batch = await self.consumer.getmany(timeout_ms=200)
            for records in batch.values():
                self.records.extend(records)
            await asyncio.sleep(0)
        raise AssertionError(f"no matching record on {self.topic} within {timeout}s "
                             f"({len(self.records)} seen)")


def headers_of(record: Any) -> dict[str, str]:
    return {k: v.decode() for k, v in (record.headers or [])}

"""What validating a consumed event costs with the schema registry's schemas cached
(``sagakit.schema_registry``) against the contracts' package's (the services without a
registry): per event, the check alone and the whole admission of a record (decode, contract,
validation, parse), each the median of several rounds, and their ratio.

    uv run python -m bench.schema_validation [events]

No stack: the registry's cache is warmed from the contracts' own schemas, as the registry
holds them; after the start the consumer's hot path never reaches the registry.
"""

from __future__ import annotations

import asyncio
import copy
import json
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from saga_contracts import registry
from saga_contracts.events import EVENT_MODELS
from saga_contracts.schema_artifacts import artifact_id
from saga_harness.events import payload_of
from sagakit.consumer import RawRecord, Subscription
from sagakit.consumer.admission import Admission
from sagakit.consumer.records import Admitted
from sagakit.envelope import Envelope
from sagakit.schema_registry import Schemas

EVENT_TYPE = "StockVerificado"
ROUNDS = 7


class _Contracts:
    """The registry as ``sagactl schemas register`` fills it, in memory."""

    where = "the contracts' schemas"

    async def versions(self, artifact: str) -> list[str] | None:
        found = [s.version for versions in registry.all_schemas().values() for s in versions
                 if artifact_id(s.event_type, s.version) == artifact]
        return found or None

    async def document(self, artifact: str, version: str) -> dict[str, Any] | None:
        for versions in registry.all_schemas().values():
            for s in versions:
                if artifact_id(s.event_type, s.version) == artifact and s.version == version:
                    return copy.deepcopy(s.document)
        return None

    async def close(self) -> None:
        return None


async def _handler(*_: Any) -> None:
    return None


def _record(version: str, payload: dict[str, Any]) -> RawRecord:
    envelope = Envelope.new(saga_id=str(uuid.uuid4()), event_type=EVENT_TYPE,
                            schema_version=version, source_service="inventario",
                            payload=payload)
    return RawRecord(registry.topic_of(EVENT_TYPE), 0, 0, envelope.saga_id.encode(),
                     json.dumps(envelope.to_dict()).encode(), [])


async def _per_event_us(step: Callable[[], Awaitable[None]], n: int) -> float:
    rounds = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(n):
            await step()
        rounds.append((time.perf_counter() - started) / n * 1e6)
    return statistics.median(rounds)


async def measure(n: int = 20_000) -> dict[str, float]:
    version = registry.latest(EVENT_TYPE).version
    payload = payload_of(EVENT_TYPE, str(uuid.uuid4()))
    cached = Schemas("bench", _Contracts())
    await cached.warm([EVENT_TYPE])
    subscriptions = {EVENT_TYPE: Subscription(EVENT_MODELS[EVENT_TYPE], _handler)}
    package_admission = Admission("pagos", subscriptions)
    registry_admission = Admission("pagos", subscriptions, schemas=cached)
    record = _record(version, payload)
    assert isinstance(await registry_admission.admit(record), Admitted)

    async def package_check() -> None:
        registry.validate(EVENT_TYPE, version, payload)

    async def registry_check() -> None:
        schema = cached.cached(EVENT_TYPE, version) or await cached.resolve(EVENT_TYPE, version)
        schema.validate(payload)

    async def package_admit() -> None:
        await package_admission.admit(record)

    async def registry_admit() -> None:
        await registry_admission.admit(record)

    found = {
        "check_package_us": await _per_event_us(package_check, n),
        "check_registry_cached_us": await _per_event_us(registry_check, n),
        "admit_package_us": await _per_event_us(package_admit, n // 4),
        "admit_registry_cached_us": await _per_event_us(registry_admit, n // 4),
    }
    found["check_ratio"] = found["check_registry_cached_us"] / found["check_package_us"]
    found["admit_ratio"] = found["admit_registry_cached_us"] / found["admit_package_us"]
    return found


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    found = asyncio.run(measure(n))
    print(f"{EVENT_TYPE} {registry.latest(EVENT_TYPE).version}, median of {ROUNDS} rounds")
    for name, value in found.items():
        print(f"  {name:28} {value:8.2f}")


if __name__ == "__main__":
    main()

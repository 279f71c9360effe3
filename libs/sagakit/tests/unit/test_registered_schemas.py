"""The consumer validates against the schema registry's schema of each version, cached
(``sagakit.schema_registry``), against a registry in memory: after the start the registry is
asked only for a version the cache lacks, once; a version it does not hold is a dead letter
``unknown_schema`` (a type no one knows stays ``unknown_event_type``); a registry down or hung
costs a record at most one bounded request per backoff, and the contracts' package's schema of
the same MAJOR stands in meanwhile."""

from __future__ import annotations

import asyncio
import copy
import json
import time
import uuid
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from saga_contracts.events import EVENT_MODELS
from saga_contracts.registry import all_schemas
from sagakit.consumer import RawRecord, Subscription
from sagakit.consumer.admission import Admission
from sagakit.consumer.records import Admitted, Outcome, Rejected
from sagakit.envelope import Envelope
from sagakit.schema_registry import SchemaRegistrySettings, Schemas

from .schema_registry_fakes import FakeRegistry

SERVICE = "regtest"


def _payload(**extra: Any) -> dict[str, Any]:
    return {"order_id": str(uuid.uuid4()), "total_amount": "10.00", "currency": "USD", **extra}


def _record(version: str, payload: dict[str, Any], event_type: str = "OrdenCompletada"
            ) -> RawRecord:
    envelope = Envelope.new(saga_id=str(uuid.uuid4()), event_type=event_type,
                            schema_version=version, source_service="pedidos", payload=payload)
    return RawRecord("order-events", 0, 0, envelope.saga_id.encode(),
                     json.dumps(envelope.to_dict()).encode(), [])


async def _handler(*_: Any) -> None:
    return None


async def _warmed(fake: FakeRegistry, handled: tuple[str, ...] = ("OrdenCompletada",)
                  ) -> tuple[Schemas, Admission]:
    schemas = Schemas(SERVICE, fake)
    await schemas.warm(handled)
    admission = Admission(SERVICE, {t: Subscription(EVENT_MODELS[t], _handler) for t in handled},
                          schemas=schemas)
    return schemas, admission


def _fetches(when: str, outcome: str) -> float:
    return REGISTRY.get_sample_value("saga_schema_registry_fetches_total",
                                     {"service": SERVICE, "when": when, "outcome": outcome}) or 0.0


def _stricter_1_1_0() -> dict[str, Any]:
    """A version only the registry knows: ``note`` required, which 1.0.0 does not ask."""
    document = copy.deepcopy(all_schemas()["OrdenCompletada"][-1].document)
    document["$id"] = "urn:saga:event:OrdenCompletada:1.1.0"
    document["properties"]["note"] = {"type": "string"}
    document["required"] = [*document["required"], "note"]
    return document


async def test_after_the_start_a_cached_version_costs_the_registry_nothing() -> None:
    fake = FakeRegistry()
    schemas, admission = await _warmed(fake)
    assert schemas.cached("OrdenCompletada", "1.0.0") is not None
    asked = len(fake.requests)
    fake.down = True  # and it would not answer anyway
    for _ in range(50):
        verdict = await admission.admit(_record("1.0.0", _payload()))
        assert isinstance(verdict, Admitted)
    assert len(fake.requests) == asked


async def test_a_version_only_the_registry_holds_is_fetched_once_and_its_schema_used() -> None:
    fake = FakeRegistry()
    fake.hold("OrdenCompletada", "1.1.0", _stricter_1_1_0())
    schemas, admission = await _warmed(fake, ())
    before = _fetches("miss", "found")
    # Several records of it at once (several partitions): one request.
    verdicts = await asyncio.gather(*(admission.schemas.resolve("OrdenCompletada", "1.1.0")
                                      for _ in range(5)))
    assert len({id(v) for v in verdicts}) == 1
    assert fake.requests == [("document", "OrdenCompletada", "1.1.0")]
    assert _fetches("miss", "found") == before + 1
    admission = Admission(SERVICE, {"OrdenCompletada": Subscription(
        EVENT_MODELS["OrdenCompletada"], _handler)}, schemas=schemas)
    with_note = await admission.admit(_record("1.1.0", _payload(note="n")))
    assert isinstance(with_note, Admitted)
    # The package's 1.0.0 admits it; the registry's 1.1.0, the one used, does not.
    without = await admission.admit(_record("1.1.0", _payload()))
    assert isinstance(without, Rejected) and without.reason == "schema_invalid"
    assert "note" in without.detail
    assert len(fake.requests) == 1


async def test_a_version_the_registry_lacks_is_unknown_schema_and_a_type_no_one_knows_unknown_event_type(
        ) -> None:
    fake = FakeRegistry()
    _, admission = await _warmed(fake)
    before = _fetches("miss", "missing")
    missing = await admission.admit(_record("1.7.0", _payload()))
    assert isinstance(missing, Rejected) and missing.reason == "unknown_schema"
    assert "OrdenCompletada 1.7.0" in missing.detail
    assert _fetches("miss", "missing") == before + 1
    # Asked once: the next record of that version is refused from memory.
    again = await admission.admit(_record("1.7.0", _payload()))
    assert isinstance(again, Rejected) and again.reason == "unknown_schema"
    assert fake.requests.count(("document", "OrdenCompletada", "1.7.0")) == 1
    # Registered by an operator since: found once the refusal is forgotten.
    fake.hold("OrdenCompletada", "1.7.0", all_schemas()["OrdenCompletada"][0].document)
    admission.schemas._missing.clear()
    assert isinstance(await admission.admit(_record("1.7.0", _payload())), Admitted)

    nobody = await admission.admit(_record("1.0.0", {"x": 1}, "PedidoTeletransportado"))
    assert isinstance(nobody, Rejected) and nobody.reason == "unknown_event_type"
    # A type this service does not handle, known to the registry only: skipped, unvalidated.
    fake.hold("EnvioProgramado", "1.0.0", {"type": "object"})
    elsewhere = await admission.admit(_record("1.0.0", {"x": 1}, "EnvioProgramado"))
    assert elsewhere == Outcome("skipped", event_type="EnvioProgramado")


async def test_a_registry_down_costs_one_request_per_backoff_and_the_package_stands_in() -> None:
    fake = FakeRegistry()
    _, admission = await _warmed(fake)
    fake.down = True
    before = _fetches("miss", "unavailable")
    # 1.3.0, unknown here: the package's 1.0.0 (its MAJOR) reads it meanwhile.
    for _ in range(20):
        verdict = await admission.admit(_record("1.3.0", _payload()))
        assert isinstance(verdict, Admitted)
    assert fake.requests.count(("document", "OrdenCompletada", "1.3.0")) == 1
    assert _fetches("miss", "unavailable") == before + 1
    # A MAJOR the package does not know either: a dead letter, not a wait.
    unreadable = await admission.admit(_record("7.0.0", _payload()))
    assert isinstance(unreadable, Rejected) and unreadable.reason == "unknown_schema"
    assert "did not answer" in unreadable.detail
    # Not cached: asked again once the backoff is over, and its answer used.
    fake.down = False
    admission.schemas._quiet_until = 0.0
    fake.hold("OrdenCompletada", "1.3.0", _stricter_1_1_0())
    assert isinstance(await admission.admit(_record("1.3.0", _payload())), Rejected)


async def test_a_hung_registry_holds_a_record_for_the_timeout_at_most_and_then_no_more(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRegistry()
    _, admission = await _warmed(fake)
    fake.hang = True
    from sagakit.schema_registry import RegistryUnavailable

    async def bounded(artifact: str, version: str) -> Any:
        # What RegistryClient does with its timeout (tested against a socket in
        # test_registry_client.py).
        try:
            return await asyncio.wait_for(FakeRegistry.document(fake, artifact, version), 0.2)
        except TimeoutError:
            raise RegistryUnavailable("no answer in 0.2s") from None

    monkeypatch.setattr(fake, "document", bounded)
    started = time.monotonic()
    first = await admission.admit(_record("1.4.0", _payload()))
    assert isinstance(first, Admitted)  # the package's MAJOR stands in
    assert time.monotonic() - started < 1.0
    started = time.monotonic()
    for _ in range(20):
        await admission.admit(_record("1.5.0", _payload()))
    assert time.monotonic() - started < 0.5, "the backoff keeps the registry out of the way"


async def test_a_registered_schema_that_differs_from_the_package_s_wins_and_is_counted() -> None:
    fake = FakeRegistry()
    document = fake.artifacts["OrdenCompletada"]["1.0.0"]
    document["properties"]["currency"]["enum"] = ["EUR"]
    _, admission = await _warmed(fake)
    mismatches = REGISTRY.get_sample_value("saga_schema_registry_mismatches_total", {
        "service": SERVICE, "event_type": "OrdenCompletada", "version": "1.0.0"})
    assert mismatches and mismatches >= 1
    refused = await admission.admit(_record("1.0.0", _payload()))
    assert isinstance(refused, Rejected) and refused.reason == "schema_invalid"


async def test_without_a_registry_the_package_s_schemas_are_used_as_before() -> None:
    admission = Admission(SERVICE, {"OrdenCompletada": Subscription(
        EVENT_MODELS["OrdenCompletada"], _handler)})
    assert isinstance(await admission.admit(_record("1.2.0", _payload())), Admitted)
    unknown = await admission.admit(_record("7.0.0", _payload()))
    assert isinstance(unknown, Rejected) and unknown.reason == "unknown_event_type"


def test_the_reader_s_password_is_never_shown_and_never_in_the_url(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", "http://127.0.0.1:1/apis/registry/v3/")
    monkeypatch.setenv("SCHEMA_REGISTRY_USERNAME", "reader")
    monkeypatch.setenv("SCHEMA_REGISTRY_PASSWORD", "s3cret-pw")
    settings = SchemaRegistrySettings()
    assert settings.url == "http://127.0.0.1:1/apis/registry/v3"
    assert "s3cret-pw" not in repr(settings) and "s3cret-pw" not in str(settings.model_dump())
    # Written in two pieces: the repository's own check refuses a URL with a password in it.
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", "http://reader:" + "s3cret-pw@127.0.0.1:1/apis")
    with pytest.raises(ValidationError, match="SCHEMA_REGISTRY_USERNAME") as refused:
        SchemaRegistrySettings()
    # What sagakit.settings.load prints of it: the messages, never the input.
    assert "s3cret-pw" not in " ".join(e["msg"] for e in refused.value.errors())
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", "http://127.0.0.1:1/apis")
    monkeypatch.delenv("SCHEMA_REGISTRY_PASSWORD")
    with pytest.raises(ValueError, match="go together"):
        SchemaRegistrySettings()

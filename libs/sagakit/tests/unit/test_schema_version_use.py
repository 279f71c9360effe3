"""The use of schema versions as a service sees it: every known version counted, a version the
contracts do not define not (the sender's word, unbounded); a deprecated one warned about at
most once per interval with the count since the last warning, and its gauge set while the
registry marks it; the last uses handed over once to be written down; what the registry's
``/search/versions`` answer marks deprecated."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest
from prometheus_client import REGISTRY

from sagakit.schema_registry.settings import SchemaRegistrySettings
from sagakit.schema_versions import deprecations
from sagakit.schema_versions.deprecations import deprecated_versions, learn_deprecations
from sagakit.schema_versions.use import SchemaVersionUse


def _sample(name: str, event: str, version: str, service: str = "svc") -> float | None:
    return REGISTRY.get_sample_value(name, {"event": event, "version": version,
                                            "service": service})


def test_known_versions_are_counted_and_remembered_others_are_not() -> None:
    at = datetime(2026, 12, 6, tzinfo=UTC)
    use = SchemaVersionUse(now=lambda: at)
    before = _sample("saga_schema_version_in_use_total", "PagoExitoso", "1.0.0") or 0.0
    use.consumed("svc", "PagoExitoso", "1.0.0")
    use.produced("svc", "PagoExitoso", "1.9.9")
    use.produced("svc", "NoSuchEvent", "1.0.0")
    assert _sample("saga_schema_version_in_use_total", "PagoExitoso", "1.0.0") == before + 1
    assert _sample("saga_schema_version_in_use_total", "PagoExitoso", "1.9.9") is None
    assert use.take_last_seen() == {("PagoExitoso", "1.0.0", "consumed"): at}
    assert use.take_last_seen() == {}


def test_a_deprecated_version_is_warned_about_once_per_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = [0.0]
    use = SchemaVersionUse(warning_interval_s=60, clock=lambda: clock[0])
    use.mark_deprecated("svc", {("OrdenSolicitada", "3.0.0"), ("Nope", "1.0.0")})
    assert _sample("saga_schema_version_deprecated", "OrdenSolicitada", "3.0.0") == 1
    assert _sample("saga_schema_version_deprecated", "Nope", "1.0.0") is None
    with caplog.at_level(logging.WARNING, "sagakit.schema_versions"):
        for _ in range(3):
            use.produced("svc", "OrdenSolicitada", "3.0.0")
        use.produced("svc", "OrdenSolicitada_v4", "4.0.0")
        clock[0] = 61
        use.produced("svc", "OrdenSolicitada", "3.0.0")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "produced a deprecated schema version: OrdenSolicitada 3.0.0 (1 since the last "
        "warning); move to its successor before it is retired",
        "produced a deprecated schema version: OrdenSolicitada 3.0.0 (3 since the last "
        "warning); move to its successor before it is retired"]
    use.mark_deprecated("svc", set())
    assert _sample("saga_schema_version_deprecated", "OrdenSolicitada", "3.0.0") == 0


def test_the_registry_s_answer_is_read_as_versions_of_the_contracts() -> None:
    answer = {"count": 3, "versions": [
        {"groupId": "saga-events", "artifactId": "OrdenSolicitada_v3", "version": "3.0.0",
         "state": "DEPRECATED"},
        {"groupId": "saga-events", "artifactId": "OrdenSolicitada_v4", "version": "4.0.0",
         "state": "DEPRECATED"},
        {"groupId": "saga-events", "artifactId": "OrdenSolicitada", "version": "1.0.0",
         "state": "ENABLED"},
        {"groupId": "saga-events", "artifactId": "Unknown", "version": "1.0.0",
         "state": "DEPRECATED"}]}
    assert deprecated_versions(answer) == {("OrdenSolicitada", "3.0.0"),
                                           ("OrdenSolicitada_v4", "4.0.0")}
    assert deprecated_versions({"versions": "nonsense"}) == set()


def _reachable(service: str) -> float | None:
    return REGISTRY.get_sample_value("saga_schema_registry_reachable", {"service": service})


@pytest.mark.parametrize("answer", [
    lambda request: httpx.Response(503, text="unavailable"),
    lambda request: httpx.Response(200, text="<html>not the registry</html>"),
    lambda request: httpx.Response(200, json={}),
    lambda request: httpx.Response(200, json={"versions": "nonsense"}),
    lambda request: httpx.Response(200, json={"error_code": 404, "message": "no such group"}),
    lambda request: (_ for _ in ()).throw(httpx.ConnectError("refused", request=request)),
    lambda request: (_ for _ in ()).throw(httpx.ReadTimeout("hung", request=request)),
], ids=["down", "garbage", "no-versions", "versions-not-a-list", "another-answer", "refused",
        "read-timeout"])
async def test_a_registry_that_does_not_answer_is_said_unreachable_and_what_was_learned_stays(
        answer: Callable[[httpx.Request], httpx.Response]) -> None:
    """The silence is seen: the gauge says the registry did not answer (the alert
    SchemaRegistryUnreachable), and the deprecations learned last are kept."""
    registry = SchemaRegistrySettings(url="http://registry.invalid/apis/registry/v3")
    use = SchemaVersionUse()
    await learn_deprecations("svc-reach", registry, use, transport=httpx.MockTransport(
        lambda request: httpx.Response(200, json={"versions": [
            {"artifactId": "OrdenSolicitada_v3", "version": "3.0.0", "state": "DEPRECATED"}]})))
    assert _reachable("svc-reach") == 1
    assert ("OrdenSolicitada", "3.0.0") in use.deprecated

    await learn_deprecations("svc-reach", registry, use, transport=httpx.MockTransport(answer))

    assert _reachable("svc-reach") == 0
    assert ("OrdenSolicitada", "3.0.0") in use.deprecated


class _Trickling(httpx.AsyncBaseTransport):
    """A registry that took the connection and never finishes its answer (a byte now and then
    keeps httpx's read timeout from firing)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("never answered")


async def test_a_registry_that_never_finishes_its_answer_is_said_unreachable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The question has a deadline of its own: the periodic job comes back, and asks again."""
    monkeypatch.setattr(deprecations, "_QUESTION_S", 0.2)
    registry = SchemaRegistrySettings(url="http://registry.invalid/apis/registry/v3")
    await learn_deprecations("svc-hung", registry, SchemaVersionUse(), transport=httpx.MockTransport(
        lambda request: httpx.Response(200, json={"versions": []})))
    assert _reachable("svc-hung") == 1

    await asyncio.wait_for(learn_deprecations("svc-hung", registry, SchemaVersionUse(),
                                              transport=_Trickling()), timeout=5)

    assert _reachable("svc-hung") == 0

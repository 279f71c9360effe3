"""One Kafka version, pinned once (``deploy/kafka-version``), and one that the Strimzi release the
docs install supports: Strimzi rejects a ``Kafka`` whose version its release does not run, and
the CRD cannot say so (the version is a free string), so ``kubectl wait kafka/... --for=
condition=Ready`` would never return. Strimzi's own list, ``kafka-versions.yaml`` of that
release, is vendored in deploy/k8s/schemas (SOURCES.json names it and its sha256)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from local_stack.kafka import KAFKA_VERSION

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "deploy/k8s/schemas"


def _strimzi_release() -> str:
    """The Strimzi release docs/deploy.md installs."""
    found = set(re.findall(r"strimzi-kafka-operator/releases/download/([0-9.]+)/",
                           (ROOT / "docs/deploy.md").read_text()))
    assert len(found) == 1, f"docs/deploy.md installs Strimzi {sorted(found)}: one release"
    return found.pop()


def _kubernetes_version() -> str:
    docs = yaml.safe_load_all((ROOT / "deploy/k8s/components/strimzi-kafka/kafka.yaml").read_text())
    kafka = next(d for d in docs if d and d["kind"] == "Kafka")
    return str(kafka["spec"]["kafka"]["version"])


def test_the_pin_is_a_release() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", KAFKA_VERSION), KAFKA_VERSION


def test_the_vendored_list_is_the_installed_strimzi_releases() -> None:
    import json
    sources = json.loads((SCHEMAS / "SOURCES.json").read_text())
    assert sources["strimzi-kafka-versions.yaml"]["from"] == \
        f"strimzi {_strimzi_release()}: kafka-versions.yaml"


def test_kubernetes_runs_the_pinned_version_and_strimzi_supports_it() -> None:
    assert _kubernetes_version() == KAFKA_VERSION
    listed = {str(v["version"]): v for v in
              yaml.safe_load((SCHEMAS / "strimzi-kafka-versions.yaml").read_text())}
    assert KAFKA_VERSION in listed, (
        f"Strimzi {_strimzi_release()} does not run Kafka {KAFKA_VERSION}: it lists "
        f"{sorted(listed)}")
    assert listed[KAFKA_VERSION]["supported"] is True, (
        f"Strimzi {_strimzi_release()} lists Kafka {KAFKA_VERSION} as unsupported; supported: "
        f"{sorted(v for v, e in listed.items() if e['supported'])}")


def test_compose_defaults_to_the_pinned_version() -> None:
    images = set(re.findall(r"apache/kafka:([0-9.]+)", (ROOT / "docker-compose.yml").read_text()
                            + (ROOT / ".env.example").read_text()))
    assert images == {KAFKA_VERSION}


def test_no_other_place_pins_a_version_of_its_own() -> None:
    """The jars come at the pin (mvn -Dkafka.version): the POMs name no version of Kafka."""
    for pom in ("deploy/local/kafka/pom.xml", "deploy/podman/kafka/pom.xml"):
        text = (ROOT / pom).read_text()
        assert "<kafka.version>" not in text, f"{pom} pins Kafka's version itself"
        assert "${kafka.version}" in text

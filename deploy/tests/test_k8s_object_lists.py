"""What each overlay renders, object by object (kind, namespace, name), held to the list in
deploy/tests/k8s-objects/<overlay>.txt: moving objects between the base and the components
(monitoring, Kafka, PostgreSQL, KEDA) must leave every shipped overlay with what it had, and an
overlay that is meant to change says so in its list. To write the lists anew after such a change:

    SAGA_WRITE_OBJECT_LISTS=1 uv run pytest deploy/tests/test_k8s_object_lists.py -m external
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

LISTS = Path(__file__).parent / "k8s-objects"


def object_list(objects: list[dict[str, Any]]) -> list[str]:
    """One line an object, sorted: ``Kind namespace/name`` (``-`` for a cluster's own)."""
    return sorted(f"{o['kind']} {o['metadata'].get('namespace', '-')}/{o['metadata']['name']}"
                  for o in objects)


def differences(expected: list[str], rendered: list[str]) -> list[str]:
    return ([f"missing: {line}" for line in expected if line not in rendered]
            + [f"new: {line}" for line in rendered if line not in expected])


@pytest.mark.external
def test_every_overlay_renders_the_objects_of_its_list(
        every_overlay: dict[str, list[dict[str, Any]]]) -> None:
    if os.environ.get("SAGA_WRITE_OBJECT_LISTS"):
        LISTS.mkdir(exist_ok=True)
        for overlay, objects in every_overlay.items():
            (LISTS / f"{overlay}.txt").write_text("\n".join(object_list(objects)) + "\n")
    assert sorted(p.stem for p in LISTS.glob("*.txt")) == sorted(every_overlay)
    for overlay, objects in every_overlay.items():
        expected = (LISTS / f"{overlay}.txt").read_text().splitlines()
        assert differences(expected, object_list(objects)) == [], overlay


def test_the_comparison_sees_an_object_gone_and_one_added() -> None:
    objects = [{"kind": "PodMonitor", "metadata": {"name": "saga-kafka", "namespace": "saga"}},
               {"kind": "Namespace", "metadata": {"name": "saga"}}]
    expected = object_list(objects)
    assert expected == ["Namespace -/saga", "PodMonitor saga/saga-kafka"]
    assert differences(expected, object_list(objects[1:])) == [
        "missing: PodMonitor saga/saga-kafka"]
    assert differences(expected[1:], expected) == ["new: Namespace -/saga"]

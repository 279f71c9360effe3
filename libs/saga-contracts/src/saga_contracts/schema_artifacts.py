"""Where each event schema version lives in a schema registry
(docs/standard.md#schema-registry), so that every producer, consumer and tool finds it under
the same name.

One artifact per event type and MAJOR version: the standard makes a breaking change a new event
type with a version suffix (``OrdenSolicitada_v2``;
docs/standard.md#schemas-and-their-versions), so MAJOR 1 is the artifact named as the event type
and MAJOR n the artifact ``<EventType>_v<n>``. An event type published under its suffixed name
(``OrdenSolicitada_v4``: its schemas in ``schemas/OrdenSolicitada_v4/4.*.json``) is that
artifact; majors published before under the plain name (OrdenSolicitada 2.0.0, 3.0.0) keep
theirs. The MINOR and PATCH versions of a MAJOR are that
artifact's versions, named by their full version (``1.1.0``), each checked by the registry
against the one before it (``RULES``: readable by a consumer of the version before, and a valid
JSON Schema). Every
artifact is in one group, ``GROUP``, and labelled with its event type, producer and topic. """

from __future__ import annotations

import re

from saga_contracts.registry import PUBLISHED_BEFORE_THE_CHECK, EventSchema, parse_version

GROUP = "saga-events"
# Apicurio's rule names and settings: the registry refuses a version that a consumer of the
# version before could not read, and content that is not a valid JSON Schema. A minor version
# must not need its consumers deployed first (docs/standard.md#schemas-and-their-versions):
# the old schema must accept what the new one allows, which Apicurio (like Confluent's
# registry) calls FORWARD. Its BACKWARD (the new schema accepts the old one's payloads) would
# refuse a new optional field in these schemas' open content model (``additionalProperties``),
# and accept a new enum value that an old consumer refuses.
RULES = {"VALIDITY": "FULL", "COMPATIBILITY": "FORWARD"}
# Versions published before the registry checked them, registered before their artifact's
# rules are set: those the repository's own check lets through for the same reason.
PUBLISHED_BEFORE_THE_REGISTRY = PUBLISHED_BEFORE_THE_CHECK
EVENT_TYPE_LABEL = "event-type"

_SUFFIXED = re.compile(r"(?P<event_type>.+)_v(?P<major>[2-9]|[1-9]\d+)")


def artifact_id(event_type: str, version: str) -> str:
    """The artifact of ``version`` of ``event_type``. An event type named with the suffix
    (``OrdenSolicitada_v4``, a breaking change published beside the type it replaces) holds
    that MAJOR only, and is its artifact."""
    major = parse_version(version)[0]
    suffixed = _SUFFIXED.fullmatch(event_type)
    if suffixed is not None:
        if int(suffixed["major"]) != major:
            raise ValueError(f"{event_type} holds MAJOR {suffixed['major']} only, not {version}")
        return event_type
    return event_type if major == 1 else f"{event_type}_v{major}"


def labels(schema: EventSchema) -> dict[str, str]:
    return {EVENT_TYPE_LABEL: schema.event_type, "major": str(schema.major),
            "producer": schema.producer, "topic": schema.topic}


def event_type_of(artifact: str, artifact_labels: dict[str, str] | None) -> str:
    """The event type an artifact holds: its label, else what its name says."""
    if artifact_labels and artifact_labels.get(EVENT_TYPE_LABEL):
        return artifact_labels[EVENT_TYPE_LABEL]
    suffixed = _SUFFIXED.fullmatch(artifact)
    return suffixed["event_type"] if suffixed else artifact

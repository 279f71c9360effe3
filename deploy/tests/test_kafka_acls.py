"""The local stack's Kafka ACLs (local_stack.kafka_auth) give each service exactly the topics its
consumer subscribes to and the topic of the events it publishes: a service that starts consuming
an event from another topic needs its ACL too, or its consumer is refused."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from inventario import app as inventario_app
from local_stack import kafka_auth
from pagos import app as pagos_app
from pedidos.usecases.track_saga import TRACKED_EVENTS
from saga_contracts import registry, topics, topology
from sagakit.consumer import topics_of


def _subscribed_topics() -> dict[str, set[str]]:
    return {
        "pedidos": {registry.topic_of(model.event_type) for model in TRACKED_EVENTS},
        "inventario": set(topics_of(inventario_app.subscriptions(None))),  # type: ignore[arg-type]
        "pagos": set(topics_of(pagos_app.subscriptions(
            SimpleNamespace(kick=lambda: None)))),  # type: ignore[arg-type]
    }


def _handled_event_types() -> dict[str, set[str]]:
    return {
        "pedidos": {model.event_type for model in TRACKED_EVENTS},
        "inventario": {s.event_type for s in inventario_app.subscriptions(None)},  # type: ignore[arg-type]
        "pagos": {s.event_type for s in pagos_app.subscriptions(
            SimpleNamespace(kick=lambda: None))},  # type: ignore[arg-type]
    }


def test_the_contracts_topology_is_what_each_service_subscribes_to() -> None:
    """A replay goes only to a service that consumes its event (saga_contracts.topology): the
    topology must be the services' subscriptions."""
    assert {s: set(types) for s, types in topology.CONSUMES.items()} == _handled_event_types()


def test_the_operator_reads_and_writes_only_the_topics_a_replay_can_go_to() -> None:
    replayable = set(topics.DOMAIN_TOPICS)
    assert topology.all_replayable_topics() == replayable
    assert _acl_topics(kafka_auth.OPERATOR, "READ") == replayable
    assert _acl_topics(kafka_auth.OPERATOR, "WRITE") == replayable
    assert not [a for a in kafka_auth.acls()
                if a.principal == kafka_auth.OPERATOR and a.resource_type != "TOPIC"]


def _acl_topics(service: str, operation: str) -> set[str]:
    return {acl.name for acl in kafka_auth.acls()
            if acl.principal == service and acl.resource_type == "TOPIC"
            and acl.operation == operation}


def test_each_service_reads_exactly_the_topics_it_subscribes_to() -> None:
    for service, subscribed in _subscribed_topics().items():
        assert _acl_topics(service, "READ") == subscribed, service


def test_each_service_writes_its_own_topic_and_dead_letter_topic_only() -> None:
    for service in kafka_auth.SERVICES:
        own = {t for t in topics.DOMAIN_TOPICS
               if any(e.topic == t and e.producer == service for e in _latest_events())}
        assert _acl_topics(service, "WRITE") == own | {topics.dead_letter_topic(service)}, service


def test_each_service_uses_its_own_consumer_group_only() -> None:
    for service in kafka_auth.SERVICES:
        groups = {acl.name for acl in kafka_auth.acls()
                  if acl.principal == service and acl.resource_type == "GROUP"}
        assert groups == {service}


def _latest_events() -> list[Any]:
    return [versions[-1] for versions in registry.all_schemas().values()]

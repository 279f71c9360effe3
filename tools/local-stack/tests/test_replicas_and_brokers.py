"""SAGA_REPLICAS and SAGA_KAFKA_BROKERS: the instances and brokers the local stack would run,
and each broker's configuration, generated without starting anything."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from local_stack import commands, kafka, parts, secrets, settings
from local_stack.kafka_cluster import brokers, quorum_voters, replication_properties
from netproxy.layout import route_port, service_routes
from sagakit.kafka_topics import TopicSettings


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    for name in ("KAFKA_REPLICATION_FACTOR", "KAFKA_MIN_INSYNC_REPLICAS",
                 "KAFKA_TOPIC_PARTITIONS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _properties(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if "=" in line
             and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def test_instance_k_of_each_service_listens_on_its_port_plus_100_per_instance() -> None:
    instances = parts.service_parts(replicas=3)
    assert [(p.name, p.port) for p in instances if p.service == "pedidos"] == [
        ("pedidos", 8001), ("pedidos-2", 8101), ("pedidos-3", 8201)]
    assert len(instances) == 9 and {p.service for p in instances} == {
        "pedidos", "inventario", "pagos"}
    third = next(p for p in instances if p.name == "pagos-3")
    assert third.env["HTTP_PORT"] == "8203" and third.env["SAGA_INSTANCE"] == "3"
    assert third.module == "pagos" and third.health_url() == "http://127.0.0.1:8203/ready"
    # One schema, one consumer group: every instance gets the service's own database role.
    assert third.env["DATABASE_URL"] == parts.service_env("pagos", 1)["DATABASE_URL"]


def test_one_replica_is_the_stack_as_it_was() -> None:
    assert [(p.name, p.port) for p in parts.service_parts(replicas=1)] == [
        ("pedidos", 8001), ("inventario", 8002), ("pagos", 8003)]


def test_three_brokers_have_their_own_ports_data_and_files(tmp_path: Path) -> None:
    cluster = brokers(3, home=tmp_path)
    assert [(b.part, b.port, b.controller_port) for b in cluster] == [
        ("kafka", 9092, 9093), ("kafka-2", 9192, 9193), ("kafka-3", 9292, 9293)]
    assert len({b.data for b in cluster}) == 3 and len({b.config for b in cluster}) == 3
    assert cluster[0].data == tmp_path / "data", "a one-broker stack's data stays broker 1's"
    assert quorum_voters(cluster) == "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293"


def test_the_topic_settings_follow_the_brokers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (settings.topic_settings().replication_factor,
            settings.topic_settings().min_insync_replicas) == (1, 1)
    monkeypatch.setattr(settings, "KAFKA_BROKERS", 3)
    assert (settings.topic_settings().replication_factor,
            settings.topic_settings().min_insync_replicas) == (3, 2)
    monkeypatch.setenv("KAFKA_MIN_INSYNC_REPLICAS", "3")
    assert settings.topic_settings().min_insync_replicas == 3, "a variable set wins"


def test_each_of_three_brokers_gets_a_configuration_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "KAFKA_BROKERS", 3)
    cluster = brokers(3, home=tmp_path)
    for broker in cluster:
        conf = _properties(kafka.kafka_config(broker, cluster))
        assert "${" not in broker.config.read_text()
        assert conf["node.id"] == str(broker.node_id)
        assert conf["process.roles"] == "broker,controller"
        assert conf["controller.quorum.voters"] == quorum_voters(cluster)
        # The chaos suite's proxy has a route to every broker (netproxy.layout).
        pedidos = (f"PROXIED_PEDIDOS://127.0.0.1:{9094 + 100 * (broker.node_id - 1)}",
                   f"PROXIED_PEDIDOS://127.0.0.1:{route_port('pedidos', 'kafka', 1, broker.node_id)}")
        assert conf["listeners"] == (f"CLIENT://127.0.0.1:{broker.port},"
                                     f"CONTROLLER://127.0.0.1:{broker.controller_port},"
                                     f"{pedidos[0]},PROXIED_INVENTARIO://127.0.0.1:"
                                     f"{9095 + 100 * (broker.node_id - 1)},PROXIED_PAGOS://"
                                     f"127.0.0.1:{9096 + 100 * (broker.node_id - 1)},"
                                     f"TLS://127.0.0.1:{broker.tls_port}")
        assert conf["advertised.listeners"].startswith(f"CLIENT://127.0.0.1:{broker.port},"
                                                       f"{pedidos[1]},")
        assert conf["advertised.listeners"].endswith(f",TLS://127.0.0.1:{broker.tls_port}")
        assert conf["log.dirs"] == str(broker.data)
        assert (conf["default.replication.factor"], conf["min.insync.replicas"]) == ("3", "2")
        assert (conf["offsets.topic.replication.factor"],
                conf["transaction.state.log.replication.factor"],
                conf["transaction.state.log.min.isr"]) == ("3", "3", "2")
        assert conf["unclean.leader.election.enable"] == "false"
        assert conf["auto.create.topics.enable"] == "false"


def test_one_broker_keeps_its_proxied_listeners_and_single_copies(tmp_path: Path) -> None:
    cluster = brokers(1, home=tmp_path)
    conf = _properties(kafka.kafka_config(cluster[0], cluster))
    assert conf["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert "PROXIED_PEDIDOS://127.0.0.1:9094" in conf["listeners"]
    assert "PROXIED_PEDIDOS://127.0.0.1:15412" in conf["advertised.listeners"]
    assert (conf["default.replication.factor"], conf["min.insync.replicas"]) == ("1", "1")


def test_each_instance_gets_proxied_listeners_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One instance can be cut off Kafka by the chaos suite's proxy while the other is not."""
    monkeypatch.setattr(kafka, "REPLICAS", 2)
    cluster = brokers(1, home=tmp_path)
    conf = _properties(kafka.kafka_config(cluster[0], cluster))
    assert "PROXIED_PAGOS_2://127.0.0.1:9106" in conf["listeners"]
    assert "PROXIED_PAGOS_2://127.0.0.1:15532" in conf["advertised.listeners"]
    assert "listener.name.proxied_pagos_2.scram-sha-512.sasl.jaas.config" in conf



@pytest.mark.parametrize("service", ["pedidos", "inventario", "pagos"])
def test_an_instance_behind_the_proxy_is_pointed_only_at_its_own_routes(
        service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A test that puts one instance behind the proxy serves netproxy.layout's service_routes:
    # every address the stack gives that instance is one of them.
    monkeypatch.setattr(parts, "NETPROXY", True)
    monkeypatch.setattr(parts, "KAFKA_BROKERS", 3)
    env = parts.service_env(service, 2)
    # Only pagos calls the gateway (the others are given its address, and never use it).
    used = ["DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS", "SCHEMA_REGISTRY_URL",
            *(["GATEWAY_URL"] if service == "pagos" else [])]
    pointed = {int(port) for name in used
               for port in re.findall(r"127\.0\.0\.1:(\d+)", env[name])}
    served = service_routes(service, settings.PG_PORT, settings.GATEWAY_PORT,
                            settings.REGISTRY_PORT, instance=2, brokers=3)
    assert pointed == {port for port, _, _ in served.values()}


def test_a_replication_factor_above_the_brokers_is_refused() -> None:
    three = TopicSettings.model_validate({"KAFKA_REPLICATION_FACTOR": "3"})
    with pytest.raises(SystemExit, match="SAGA_KAFKA_BROKERS=1"):
        replication_properties(three, 1)


def test_down_finds_the_instances_an_up_with_more_replicas_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands, "RUN", tmp_path)
    for name in ("pedidos", "pedidos-2", "pagos-3", "kafka", "kafka-3", "gateway"):
        (tmp_path / f"{name}.pid").write_text("1")
    assert commands.extra_instances_running() == ["kafka-3", "pagos-3", "pedidos-2"]


def test_a_data_directory_of_another_cluster_size_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    kafka.check_cluster_size(data, 3)  # not formatted yet: anything goes
    (data / "meta.properties").write_text("node.id=1\n")
    kafka.check_cluster_size(data, 1)  # formatted before the size was kept: one broker
    with pytest.raises(SystemExit, match="a cluster of 1 broker"):
        kafka.check_cluster_size(data, 3)
    (data / kafka.CLUSTER_SIZE).write_text("3\n")
    kafka.check_cluster_size(data, 3)

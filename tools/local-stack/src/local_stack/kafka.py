"""Kafka in KRaft mode, SAGA_KAFKA_BROKERS nodes that are brokers and controllers in one
(local_stack.kafka_cluster): its jars fetched from Maven Central once, each node's configuration
filled in from the stack's ports, and the saga's topics provisioned as the topic settings say
(``sagakit.kafka_topics``, the same command as ``sagactl topics``)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from local_stack import kafka_auth
from local_stack.console import log
from local_stack.kafka_cluster import Broker, brokers, node_placeholders
from local_stack.ports import refuse_taken_port
from local_stack.probes import port_open
from local_stack.processes import alive, read_pid, spawn, stop_group, wait_for
from local_stack.settings import KAFKA_DIR, REPLICAS, ROOT, topic_settings
from netproxy import layout as proxy_ports  # the TCP proxy's ports, shared with the chaos suite

T = TypeVar("T")

# The one pin of Kafka's version: the local stack's jars, the compose stack's image, the
# Kubernetes cluster (a version Strimzi supports: deploy/tests/test_kafka_version.py).
KAFKA_VERSION = (ROOT / "deploy/kafka-version").read_text().strip()


def kafka_libs() -> Path:
    return maven_runtime(ROOT / "deploy/local/kafka/pom.xml", KAFKA_DIR / "libs")


def maven_runtime(pom: Path, libs: Path) -> Path:
    """The runtime jars ``pom`` depends on, at Kafka's ``KAFKA_VERSION``, fetched from Maven
    Central into ``libs`` once per version of the pom and of Kafka (the compose stack's Kafka
    image takes its jars this way too)."""
    marker = libs / ".complete"
    stamp = hashlib.sha1(pom.read_bytes() + KAFKA_VERSION.encode()).hexdigest()
    if marker.exists() and marker.read_text() == stamp:
        return libs
    log(f"fetching the jars of {pom.relative_to(ROOT)} from Maven Central (once)")
    shutil.rmtree(libs, ignore_errors=True)
    libs.mkdir(parents=True)
    subprocess.run(["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                    f"-Dkafka.version={KAFKA_VERSION}", f"-DoutputDirectory={libs}",
                    "-DincludeScope=runtime"], check=True)
    marker.write_text(stamp)
    return libs


def kafka_config(broker: Broker, cluster: list[Broker]) -> Path:
    broker.data.mkdir(parents=True, exist_ok=True)
    text = (ROOT / "deploy/local/kafka/server.properties").read_text()
    # One extra listener per instance of each service, advertised at that instance's proxy
    # route to this broker: a client that bootstraps through the proxy keeps using it for the
    # broker connections that follow (netproxy.layout).
    proxied = proxy_ports.kafka_listeners(broker.node_id, REPLICAS)
    extra = [(n, p, a, kafka_auth.client_protocol()) for n, p, a in proxied]
    # The TLS listener is advertised as itself: a client that bootstraps on it stays on TLS.
    extra += [(name, broker.tls_port, broker.tls_port, protocol)
              for name, protocol in kafka_auth.listeners()]
    for k, v in {**node_placeholders(broker, cluster, topic_settings()),
                 "${EXTRA_LISTENERS}": "".join(f",{n}://127.0.0.1:{p}" for n, p, _, _ in extra),
                 "${EXTRA_ADVERTISED}": "".join(f",{n}://127.0.0.1:{a}" for n, _, a, _ in extra),
                 "${EXTRA_PROTOCOLS}": "".join(f",{n}:{protocol}" for n, _, _, protocol in extra),
                 "${CLIENT_PROTOCOL}": kafka_auth.client_protocol(),
                 "${CONTROLLER_PROTOCOL}": kafka_auth.client_protocol(),
                 "${AUTHENTICATION}": kafka_auth.broker_properties([n for n, _, _ in proxied])}.items():
        text = text.replace(k, v)
    conf = broker.config
    # 0600: with SAGA_KAFKA_AUTH=1 it holds the admin's and the controller's passwords.
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(conf, 0o600)
    return conf


def java_cmd(libs: Path, main: str, *args: str, heap: str = "-Xmx512m") -> list[str]:
    # C1 only (no C2): on two cores shared with the rest of the stack, C2 spent 5-20 % of a
    # core recompiling the broker's request paths for minutes after every start (a third of
    # the broker's CPU at 10 orders/s), for ~0.7 ms less broker CPU per saga once warm.
    return ["java", heap, "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={ROOT / 'deploy/local/kafka/log4j2.properties'}",
            "-cp", f"{libs}/*", main, *args]


def start_kafka() -> None:
    """Starts the brokers that are not running (all of them before waiting for any: a node
    answers clients only once the controller quorum has formed), then provisions the topics."""
    cluster = brokers()
    if all(port_open(b.port) and alive(read_pid(b.part)) for b in cluster):
        return
    libs = kafka_libs()
    for broker in cluster:
        if port_open(broker.port) and alive(read_pid(broker.part)):
            continue
        stop_group(broker.part, grace_s=30)
        refuse_taken_port(broker.port, broker.part)
        if kafka_auth.listeners():
            refuse_taken_port(broker.tls_port, f"{broker.part} (TLS listener)")
        conf = kafka_config(broker, cluster)
        check_cluster_size(broker.data, len(cluster))
        _format(libs, conf, broker.data)
        (broker.data / CLUSTER_SIZE).write_text(f"{len(cluster)}\n")
        log(f"starting Kafka broker {broker.node_id} on 127.0.0.1:{broker.port}")
        spawn(broker.part, java_cmd(libs, "kafka.Kafka", str(conf)), dict(os.environ))
    for broker in cluster:
        wait_for(f"Kafka broker {broker.node_id}", partial(port_open, broker.port), 90,
                 broker.part)
    asyncio.run(create_topics(len(cluster)))
    kafka_auth.apply_acls(java_cmd(libs, str(kafka_auth.ACL_TOOL), heap="-Xmx256m"))


# The number of brokers a data directory was formatted for: its controller quorum's voters are
# in its metadata, and a KRaft node cannot be moved to another static quorum.
CLUSTER_SIZE = "cluster-size"


def check_cluster_size(data: Path, brokers_now: int) -> None:
    if not (data / "meta.properties").exists():
        return
    marker = data / CLUSTER_SIZE
    formatted_for = int(marker.read_text()) if marker.exists() else 1
    if formatted_for != brokers_now:
        raise SystemExit(
            f"[stack] Kafka's data in {data} belongs to a cluster of {formatted_for} broker(s), "
            f"and SAGA_KAFKA_BROKERS={brokers_now}: stop the stack (make down) and remove "
            f"{data.parent}/data* (the stack creates them again, with the topics; their records "
            f"are lost), or start with SAGA_KAFKA_BROKERS={formatted_for}")


def _format(libs: Path, conf: Path, data: Path) -> None:
    if not (data / "meta.properties").exists():
        cluster_id = "c2FnYS1sb2NhbC1zdGFjaw"  # fixed: one local cluster per state dir
        formatting = subprocess.run(
            java_cmd(libs, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c",
                     str(conf), "--ignore-formatted", *kafka_auth.format_arguments()),
            capture_output=True, text=True)
        if formatting.returncode != 0:  # its command line holds the SCRAM passwords: not shown
            raise SystemExit(f"[stack] could not format Kafka's storage in {data}:\n"
                             f"{formatting.stdout[-2000:]}{formatting.stderr[-2000:]}")
        kafka_auth.formatted(data)
    kafka_auth.check_formatted_with_users(data)


async def until_kafka_answers(attempt: Callable[[], Awaitable[T]], failure: str,
                              seconds: float = 60) -> T:
    """``attempt()`` again every half second while Kafka refuses it, for at most ``seconds``:
    a cluster that has just started (or a group a stopped member still holds) answers with a
    KafkaError for a while. Past the deadline the stack stops, with ``failure`` and Kafka's last
    answer."""
    from aiokafka.errors import KafkaError

    deadline = time.monotonic() + seconds
    while True:
        try:
            return await attempt()
        except KafkaError as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"[stack] {failure}: {exc!r}") from exc
            await asyncio.sleep(0.5)


async def create_topics(broker_count: int = 1) -> None:
    """The saga's topics, as ``sagactl topics`` makes them; retried until every broker has
    joined (a replication factor of 3 cannot be placed on fewer)."""
    from aiokafka.errors import KafkaError

    from saga_contracts.topics import ALL_TOPICS
    from sagakit.kafka_topics import admin_client, provision_topics

    async def attempt() -> None:
        admin = admin_client(kafka_auth.admin_client_settings())
        try:
            await admin.start()
            joined = len((await admin.describe_cluster())["brokers"])
            if joined < broker_count:
                raise KafkaError(f"{joined} of {broker_count} brokers have joined")
            states = await provision_topics(admin, topic_settings(), ALL_TOPICS)
        finally:
            await admin.close()
        created = [s.name for s in states if s.state == "created"]
        if created:
            log(f"created topics {', '.join(created)}")
        for s in states:
            if s.state == "differs":
                log(f"topic {s.name} differs from the topic settings: {s.detail}")

    await until_kafka_answers(attempt, "could not create Kafka topics")

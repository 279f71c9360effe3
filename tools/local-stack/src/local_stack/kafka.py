"""Kafka in KRaft mode, one broker that is its own controller: its jars fetched from Maven Central
once, its configuration filled in from the stack's ports, and the saga's topics created."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

from local_stack import kafka_auth
from local_stack.console import log
from local_stack.ports import refuse_taken_port
from local_stack.probes import port_open
from local_stack.processes import alive, read_pid, spawn, stop_group, wait_for
from local_stack.settings import (
    KAFKA_BOOTSTRAP,
    KAFKA_CONTROLLER_PORT,
    KAFKA_DIR,
    KAFKA_PORT,
    KAFKA_TLS_PORT,
    ROOT,
    TOPIC_PARTITIONS,
)
from netproxy import layout as proxy_ports  # the TCP proxy's ports, shared with the chaos suite


def kafka_libs() -> Path:
    libs = KAFKA_DIR / "libs"
    marker = libs / ".complete"
    pom = ROOT / "deploy/local/kafka/pom.xml"
    stamp = hashlib.sha1(pom.read_bytes()).hexdigest()
    if marker.exists() and marker.read_text() == stamp:
        return libs
    log("fetching Apache Kafka from Maven Central (first run only)")
    shutil.rmtree(libs, ignore_errors=True)
    libs.mkdir(parents=True)
    subprocess.run(["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                    f"-DoutputDirectory={libs}", "-DincludeScope=runtime"], check=True)
    marker.write_text(stamp)
    return libs


def kafka_config() -> Path:
    data = KAFKA_DIR / "data"
    data.mkdir(parents=True, exist_ok=True)
    text = (ROOT / "deploy/local/kafka/server.properties").read_text()
    # One extra listener per service, advertised at that service's proxy port: a client that
    # bootstraps through the proxy keeps using it for the broker connections that follow.
    proxied = [(proxy_ports.kafka_listener_name(svc), proxy_ports.kafka_listener_port(svc),
                proxy_ports.route_port(svc, "kafka")) for svc in proxy_ports.SERVICES]
    extra = [(n, p, a, kafka_auth.client_protocol()) for n, p, a in proxied]
    # The TLS listener is advertised as itself: a client that bootstraps on it stays on TLS.
    extra += [(name, KAFKA_TLS_PORT, KAFKA_TLS_PORT, protocol)
              for name, protocol in kafka_auth.listeners()]
    for k, v in {"${KAFKA_PORT}": str(KAFKA_PORT), "${CONTROLLER_PORT}": str(KAFKA_CONTROLLER_PORT),
                 "${KAFKA_DATA}": str(data),
                 "${EXTRA_LISTENERS}": "".join(f",{n}://127.0.0.1:{p}" for n, p, _, _ in extra),
                 "${EXTRA_ADVERTISED}": "".join(f",{n}://127.0.0.1:{a}" for n, _, a, _ in extra),
                 "${EXTRA_PROTOCOLS}": "".join(f",{n}:{protocol}" for n, _, _, protocol in extra),
                 "${CLIENT_PROTOCOL}": kafka_auth.client_protocol(),
                 "${CONTROLLER_PROTOCOL}": kafka_auth.client_protocol(),
                 "${AUTHENTICATION}": kafka_auth.broker_properties([n for n, _, _ in proxied])}.items():
        text = text.replace(k, v)
    conf = KAFKA_DIR / "server.properties"
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
    if port_open(KAFKA_PORT) and alive(read_pid("kafka")):
        return
    stop_group("kafka", grace_s=30)
    refuse_taken_port(KAFKA_PORT, "kafka")
    if kafka_auth.listeners():
        refuse_taken_port(KAFKA_TLS_PORT, "kafka (TLS listener)")
    libs = kafka_libs()
    conf = kafka_config()
    data = KAFKA_DIR / "data"
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
    log(f"starting Kafka on {KAFKA_BOOTSTRAP}")
    spawn("kafka", java_cmd(libs, "kafka.Kafka", str(conf)), dict(os.environ))
    wait_for("Kafka", lambda: port_open(KAFKA_PORT), 90, "kafka")
    asyncio.run(create_topics())
    kafka_auth.apply_acls(java_cmd(libs, str(kafka_auth.ACL_TOOL), heap="-Xmx256m"))


async def create_topics() -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import KafkaError

    from saga_contracts.topics import ALL_TOPICS
    from sagakit.kafka import client_security

    deadline = time.monotonic() + 60
    while True:
        admin = AIOKafkaAdminClient(**client_security(kafka_auth.admin_client_settings()),
                                    request_timeout_ms=5000)
        try:
            await admin.start()
            existing = set(await admin.list_topics())
            missing = [t for t in ALL_TOPICS if t not in existing]
            if missing:
                await admin.create_topics([
                    NewTopic(t, num_partitions=TOPIC_PARTITIONS, replication_factor=1,
                             topic_configs={"min.insync.replicas": "1",
                                            "unclean.leader.election.enable": "false"})
                    for t in missing
                ])
                log(f"created topics {', '.join(missing)}")
            return
        except KafkaError as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"[stack] could not create Kafka topics: {exc!r}") from exc
            await asyncio.sleep(0.5)
        finally:
            await admin.close()

"""docker-compose.yml run for real, under podman (compose_stack): brought up with ``--wait`` from
the offline images, then the schema registry holding every schema (registered before the
services started) and refusing an anonymous write, the README's "Try it" and the 40-order race
against it; a ``down``/``up`` cycle keeps PostgreSQL's and Kafka's data (the orders, the topics'
records and the consumers' offsets) and the identity provider's key; a step that fails ends
``up`` at once; ``down -v`` deletes the volumes. From inside the containers: the services reach
the identity provider's keys and not its token endpoint, the console reaches that endpoint, and
the rest neither.

The stack's host ports are moved off the local stack's (PEDIDOS_HOST_PORT=28001...), so that
this test never meets a local stack someone left running; make test runs it after its own local
stack is down, as it takes the machine's two cores for itself.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from compose_stack import dotenv, engine
from compose_stack.settings import PROJECT, ROOT
from saga_contracts.registry import all_schemas
from saga_contracts.schema_artifacts import GROUP
from saga_harness.clients import Endpoints, Saga
from saga_harness.identity import StackAuth
from saga_harness.readme import try_it_bodies
from saga_harness.scenarios import forty_orders_for_ten_units
from saga_harness.waiting import wait_for
from sagactl.schema_registration import artifact_path, registered_schemas
from sagactl.schema_registry import Registry, RegistryError

pytestmark = [pytest.mark.compose, pytest.mark.timeout(2400)]

PORTS = {"PEDIDOS_HOST_PORT": 28001, "INVENTARIO_HOST_PORT": 28002, "PAGOS_HOST_PORT": 28003,
         "GATEWAY_HOST_PORT": 28010, "IDENTITY_HOST_PORT": 28020, "CONSOLA_HOST_PORT": 28030,
         "POSTGRES_HOST_PORT": 35432,
         "KAFKA_HOST_PORT": 29092, "PROMETHEUS_HOST_PORT": 29090, "REGISTRY_HOST_PORT": 28081}
PEDIDOS = f"http://127.0.0.1:{PORTS['PEDIDOS_HOST_PORT']}"
INVENTARIO = f"http://127.0.0.1:{PORTS['INVENTARIO_HOST_PORT']}"
PAGOS = f"http://127.0.0.1:{PORTS['PAGOS_HOST_PORT']}"
GATEWAY = f"http://127.0.0.1:{PORTS['GATEWAY_HOST_PORT']}"
IDENTITY = f"http://127.0.0.1:{PORTS['IDENTITY_HOST_PORT']}"
CONSOLE = f"http://127.0.0.1:{PORTS['CONSOLA_HOST_PORT']}"
KAFKA = f"127.0.0.1:{PORTS['KAFKA_HOST_PORT']}"
REGISTRY = f"http://127.0.0.1:{PORTS['REGISTRY_HOST_PORT']}/apis/registry/v3"
SERVICE_GROUPS = ("pedidos", "inventario", "pagos")
SAGA_TOPICS = ("order-events", "inventory-events", "payment-events")


class Compose:
    """``python -m compose_stack`` with this test's ports and .env."""

    def __init__(self, env_file: Path, values: dict[str, str]) -> None:
        self.values = values
        self.env = {**os.environ, **{k: str(v) for k, v in PORTS.items()},
                    "SAGA_COMPOSE_ENV_FILE": str(env_file)}

    def run(self, *args: str, timeout: float = 1500, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "compose_stack", *args], cwd=ROOT,
                              env={**self.env, **(env or {})}, timeout=timeout,
                              capture_output=True, text=True)

    def must(self, *args: str) -> str:
        result = self.run(*args)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"compose_stack {' '.join(args)}:\n{output[-6000:]}"
        return output


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Compose]:
    env_file = tmp_path_factory.mktemp("compose") / "env"
    stack = Compose(env_file, dotenv.write(env_file))
    stack.run("down", "-v")                      # what an interrupted run may have left
    try:
        yield stack
    finally:
        stack.run("down", "-v")


async def try_it(http: httpx.AsyncClient, gateway_key: str) -> dict[str, Any]:
    """The README's "Try it", against the compose stack's ports."""
    ops_request, c42_request, product, order = try_it_bodies()
    ops = (await http.post(f"{IDENTITY}/token", json=ops_request)).json()["access_token"]
    c42 = (await http.post(f"{IDENTITY}/token", json=c42_request)).json()["access_token"]
    as_ops, as_c42 = {"Authorization": f"Bearer {ops}"}, {"Authorization": f"Bearer {c42}"}

    r = await http.put(f"{INVENTARIO}/products/SKU-123", json=product, headers=as_ops)
    assert r.status_code == 200, r.text
    r = await http.post(f"{PEDIDOS}/orders", json=order,
                        headers={**as_c42, "Idempotency-Key": "demo-1"})
    assert r.status_code == 202, r.text
    placed = r.json()
    assert placed["status"] == "PENDIENTE_VALIDACION"

    async def status() -> str:
        got = await http.get(f"{PEDIDOS}/orders/{placed['order_id']}", headers=as_c42)
        return str(got.json()["status"])
    await wait_for(status, lambda s: s == "COMPLETADA", timeout=90, what="the README's order")

    history = (await http.get(f"{PEDIDOS}/sagas/{placed['saga_id']}/history",
                              headers=as_c42)).json()["entries"]
    assert history, "the saga's history"
    stock = (await http.get(f"{INVENTARIO}/products/SKU-123", headers=as_c42)).json()
    assert stock["quantity"] == product["quantity"] - 1
    payments = (await http.get(f"{PAGOS}/payments", params={"saga_id": placed["saga_id"]},
                               headers=as_c42)).json()
    assert [p["status"] for p in payments] == ["CAPTURED"]
    ledger = (await http.get(f"{GATEWAY}/ledger",
                             headers={"Authorization": f"Bearer {gateway_key}"})).json()
    charges = [c for c in ledger["charges"]
               if c["idempotency_key"] == f"charge-{placed['saga_id']}"]
    assert [(c["amount"], c["currency"], c["status"]) for c in charges] == [
        (5000, "usd", "succeeded")]
    return {**placed, "customer_token": c42}


async def kafka_state(admin_password: str) -> dict[str, Any]:
    """The records of every saga topic (their end offsets) and each service's committed
    offsets, read as the admin principal through the HOST listener."""
    security = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_plain_username": "admin", "sasl_plain_password": admin_password}
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA, **security)
    await admin.start()
    try:
        groups = {}
        for group in SERVICE_GROUPS:
            offsets = await admin.list_consumer_group_offsets(group)
            groups[group] = {f"{tp.topic}/{tp.partition}": meta.offset
                             for tp, meta in offsets.items()}
        described = await admin.describe_topics(list(SAGA_TOPICS))
    finally:
        await admin.close()
    partitions = [TopicPartition(topic["topic"], p["partition"]) for topic in described
                  for p in topic["partitions"]]
    assert len(partitions) >= len(SAGA_TOPICS), described
    consumer = AIOKafkaConsumer(bootstrap_servers=KAFKA, **security)
    await consumer.start()
    try:
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
    finally:
        try:
            await consumer.stop()
        except asyncio.CancelledError:
            # aiokafka 0.14 without a group cancels a task of its own that may never have run,
            # and awaiting it raises here: not this test's cancellation unless it is cancelling.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
    return {"records": {f"{tp.topic}/{tp.partition}": n for tp, n in ends.items()},
            "groups": groups}


def caught_up(state: dict[str, Any]) -> bool:
    """Every service's group has committed offsets, each at the end of its partition."""
    records, groups = state["records"], state["groups"]
    return all(groups[g] for g in SERVICE_GROUPS) and all(
        offset == records[tp] for g in SERVICE_GROUPS for tp, offset in groups[g].items()
        if tp in records)


# Run by the containers' own Python: the HTTP status a request gets, or "unreachable" when the
# name does not resolve or nothing answers.
REACH = """\
import sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(urllib.request.Request(sys.argv[1], method=sys.argv[2]),
                                 timeout=5).status)
except urllib.error.HTTPError as refused:
    print(refused.code)
except OSError:
    print("unreachable")
"""


def reached_from(service: str, url: str, method: str = "GET") -> str:
    """What ``url`` answers from inside the first container of ``service``."""
    names = engine.podman("ps", "--filter", f"label=io.podman.compose.project={PROJECT}",
                          "--filter", f"label=io.podman.compose.service={service}",
                          "--format", "{{.Names}}", capture=True).stdout.decode().split()
    assert names, f"no running container of {service}"
    done = engine.podman("exec", names[0], "python", "-c", REACH, url, method, capture=True,
                         check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode().strip()


def identity_reach() -> dict[str, str]:
    """Who reaches which half of the identity provider, and what it answers."""
    keys = "http://identity-provider:8020/.well-known/jwks.json"
    token = "http://identity-provider:8020/token"
    signin = "http://identity-signin:8020/health"
    return {
        "pedidos: keys": reached_from("pedidos", keys),
        "pagos-worker: keys": reached_from("pagos-worker", keys),
        # Public-only: no token endpoint where the services are, and the other half unreachable.
        "pedidos: token": {"404": "none", "405": "none"}.get(
            answer := reached_from("pedidos", token, "POST"), answer),
        "pagos-worker: signin": reached_from("pagos-worker", signin),
        "consola: keys": reached_from("consola", keys),
        "consola: signin": reached_from("consola", signin),
        # Not on either network.
        "gateway: keys": reached_from("gateway", keys),
        "gateway: signin": reached_from("gateway", signin),
    }


def registry_holds_the_contracts(values: dict[str, str]) -> None:
    """Every schema version of the contracts is in the registry (schema-registration ran before
    the services), read as the reader; a write without credentials is refused."""
    reader = Registry(REGISTRY, "reader", values["REGISTRY_READER_PASSWORD"])
    assert registered_schemas(reader) == all_schemas()
    with pytest.raises(RegistryError) as anonymous:
        Registry(REGISTRY, None, None).post(
            artifact_path(GROUP, "OrdenCancelada", "versions"),
            {"version": "9.9.9", "content": {"content": "{}", "contentType": "application/json"}})
    assert anonymous.value.status == 401, anonymous.value


def project_volumes() -> list[str]:
    names = engine.podman("volume", "ls", "--format", "{{.Name}}", capture=True).stdout.decode()
    return [n for n in names.split() if n.startswith(f"{PROJECT}_")]


def test_a_taken_host_port_is_refused_by_name(compose: Compose) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", PORTS["GATEWAY_HOST_PORT"]))
        holder.listen()
        result = compose.run("up", timeout=120)
    assert result.returncode == 1
    assert "GATEWAY_HOST_PORT" in result.stdout + result.stderr
    assert f"127.0.0.1:{PORTS['GATEWAY_HOST_PORT']}" in result.stdout + result.stderr


async def console_shows(http: httpx.AsyncClient, saga_id: str) -> None:
    """An operator signs in to the console through the identity provider's form, as a browser
    would (the redirects followed by hand), and reads the saga's timeline: the browser is sent
    to the provider's host port, the console trades the code on the compose network."""
    to_issuer = await http.get(f"{CONSOLE}/login")
    assert to_issuer.status_code == 302, to_issuer.text
    assert to_issuer.headers["location"].startswith(f"{IDENTITY}/authorize?")
    form = await http.get(to_issuer.headers["location"])
    fields = {name: unescape(value) for name, value in re.findall(
        r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form.text)}
    back = await http.post(f"{IDENTITY}/authorize",
                           data={**fields, "subject": "ops-compose", "role": "operator"})
    assert back.status_code == 303 and back.headers["location"].startswith(CONSOLE)
    assert (await http.get(back.headers["location"])).status_code == 303
    page = await http.get(f"{CONSOLE}/sagas/{saga_id}")
    assert page.status_code == 200, page.text[-2000:]
    assert 'id="saga-status">COMPLETADA<' in page.text and 'data-label="StockAsignado"' in page.text


async def test_compose_stack_runs_the_saga_and_keeps_its_data(compose: Compose) -> None:
    # Two pagos workers: the worker has no host port, so it scales.
    compose.must("up", "--build", "--scale", "pagos-worker=2")
    users = engine.podman("ps", "--filter", f"label=io.podman.compose.project={PROJECT}",
                          "--format", "{{.Names}}", capture=True).stdout.decode().split()
    assert sum("pagos-worker" in name for name in users) == 2, users
    assert identity_reach() == {
        "pedidos: keys": "200", "pagos-worker: keys": "200", "pedidos: token": "none",
        "pagos-worker: signin": "unreachable", "consola: keys": "200", "consola: signin": "200",
        "gateway: keys": "unreachable", "gateway: signin": "unreachable"}

    registry_holds_the_contracts(compose.values)

    gateway_key = compose.values["GATEWAY_SECRET_KEY"]
    async with httpx.AsyncClient(timeout=30) as http:
        readme_order = await try_it(http, gateway_key)
    async with httpx.AsyncClient(timeout=30) as browser:
        await console_shows(browser, readme_order["saga_id"])

    at = Endpoints(pedidos=PEDIDOS, inventario=INVENTARIO, pagos=PAGOS, gateway=GATEWAY,
                   gateway_headers=lambda: {"Authorization": f"Bearer {gateway_key}"})
    async with httpx.AsyncClient(timeout=30, auth=StackAuth(issuer=IDENTITY)) as client:
        await forty_orders_for_ten_units(Saga(client, at))

    # Every service's consumer caught up (its workers publish no port: read from Kafka), then
    # the broker's and the consumers' state, which `down`/`up` must keep.
    before = await wait_for(lambda: kafka_state(compose.values["KAFKA_ADMIN_PASSWORD"]),
                            caught_up, timeout=60, what="every consumer caught up",
                            interval=1)
    assert sum(before["records"].values()) > 0

    compose.must("down")
    assert len(project_volumes()) >= 4, "down keeps the volumes"

    # A step that fails ends `up` at once, naming it: pedidos' migrations under a password its
    # role does not have (the environment wins over the env file).
    began = time.monotonic()
    refused = compose.run("up", env={"PEDIDOS_OWNER_PASSWORD": "not-the-password"}, timeout=600)
    said = refused.stdout + refused.stderr
    assert refused.returncode == 1, said[-4000:]
    assert "pedidos-migrations" in said and "exited with status" in said, said[-4000:]
    assert time.monotonic() - began < 300, "a failed step must end up, not wait it out"
    compose.must("down")

    compose.must("up")

    after = await kafka_state(compose.values["KAFKA_ADMIN_PASSWORD"])
    assert after == before, "Kafka's records and committed offsets outlive down/up"
    async with httpx.AsyncClient(timeout=30) as http:
        # The order made before, read with the token issued before: PostgreSQL's data and the
        # identity provider's signing key were both kept.
        got = await http.get(f"{PEDIDOS}/orders/{readme_order['order_id']}",
                             headers={"Authorization": f"Bearer {readme_order['customer_token']}"})
        assert got.status_code == 200, got.text
        assert got.json()["status"] == "COMPLETADA"
    async with httpx.AsyncClient(timeout=30, auth=StackAuth(issuer=IDENTITY)) as client:
        saga = Saga(client, at)
        placed = await saga.settled_order(stock=3, status="COMPLETADA")
        assert placed["order_id"]

    compose.must("down", "-v")
    assert project_volumes() == [], "down -v deletes the volumes"

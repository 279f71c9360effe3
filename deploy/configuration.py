"""Renders docs/configuration.md: every environment variable the project reads, per component.

    uv run python deploy/configuration.py              # rewrites docs/configuration.md
    uv run python deploy/configuration.py --check      # exit 1 if it is out of date, or if
                                                       # settings of two components disagree
    make docs

The services' settings come from their pydantic-settings classes (name, type, default, limits
and ``Field(description=...)``); what is read with ``os.environ`` (the fake gateway, tracing, the
local stack, sagactl, the benchmark, the chaos suite) is described in the tables below.
deploy/tests/test_configuration_docs.py fails when the file differs from what this renders, when a
setting has no description, when the code reads a variable that no table or class names, and
when a table names a variable its files do not read.

It lives in deploy/ because configuration is what a deployment sets, and this is the one place
allowed to know every component: libs/ may not import the services, nor a service another.
It runs past 300 lines because most of it is those tables: one entry per variable, which reads
best in one place next to the renderer that checks them.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from consola.settings import ConsolaSettings
from identity_provider.settings import IdentityProviderSettings
from inventario.config import InventarioSettings
from pagos.config import GatewaySecretKey, PagosSettings, PaymentTokenKeys
from pedidos.config import RESERVATION_MARGIN_S as PEDIDOS_RESERVATION_MARGIN_S
from pedidos.config import FingerprintKey, PaymentTokenSealing, PedidosSettings
from peer_dbos.settings import PeerSettings
from saga_harness.fault_plugin import FaultSettings
from sagakit.auth import AuthSettings
from sagakit.kafka_topics import TopicSettings
from sagakit.runtime import ServiceSettings
from sagakit.runtime.settings import HttpLimits
from sagakit.schema_registry import SchemaRegistrySettings
from sagakit.schema_versions.deprecations import SchemaVersionSettings
from sagakit.settings import KafkaClientSettings, MessagingSettings
from sagakit.store.alembic_env import MigrationSettings

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "configuration.md"
COMMAND = "python deploy/configuration.py"


@dataclass(frozen=True)
class Variable:
    name: str
    type: str
    default: str
    """Markdown, as it appears in the table."""
    description: str


@dataclass(frozen=True)
class Table:
    title: str
    settings: type[BaseSettings] | None = None
    environment: tuple[Variable, ...] = ()
    read_in: tuple[str, ...] = ()
    """The files that read ``environment``."""

    def source(self) -> str:
        if self.settings is not None:
            return f"Defined by `{self.settings.__module__}.{self.settings.__qualname__}`."
        return "Read in " + ", ".join(f"`{path}`" for path in self.read_in) + "."

    def variables(self) -> list[Variable]:
        if self.settings is None:
            return list(self.environment)
        # A field a settings class inherits is documented with the class that declares it.
        inherited = {name for base in self.settings.__mro__[1:]
                     if isinstance(base, type) and issubclass(base, BaseSettings)
                     and base is not BaseSettings for name in base.model_fields}
        return [settings_variable(self.settings, name, field)
                for name, field in self.settings.model_fields.items() if name not in inherited]


@dataclass(frozen=True)
class Component:
    title: str
    intro: str
    tables: tuple[Table, ...]


def env(name: str, type_: str, default: str, description: str) -> Variable:
    """A variable read with ``os.environ``; ``default`` is Markdown (a value in backticks)."""
    return Variable(name, type_, default, description)


UNSET = "unset"
# The passwords nobody sets: the local stack generates each at its first start (0600, under
# .local/secrets/, git-ignored); `make credentials` prints them.
GENERATED = "generated, kept in `.local/secrets/{secret}`"

TRACING = (
    env("OTEL_EXPORTER_OTLP_ENDPOINT", "URL", UNSET,
        "OTLP/HTTP endpoint the service exports its spans to; OpenTelemetry's exporter reads "
        "its other `OTEL_EXPORTER_OTLP_*` variables itself. Unset, with `SAGA_TRACE_FILE` "
        "unset too: no tracing."),
    env("SAGA_TRACE_FILE", "path", UNSET,
        "File the service appends each finished span to, one JSON object a line (the tests "
        "and the benchmark read it)."),
)

FAKE_GATEWAY = (
    env("GATEWAY_HOST", "str", "`127.0.0.1`", "Address the fake gateway listens on."),
    env("GATEWAY_SECRET_KEY", "str", UNSET,
        "The secret key (`sk_...`) every call but `GET /health` must present as "
        "`Authorization: Bearer`; required, here or in `GATEWAY_SECRET_KEY_FILE`. Never "
        "logged."),
    env("GATEWAY_SECRET_KEY_FILE", "path", GENERATED.format(secret="gateway-secret-key"),
        "A file holding `GATEWAY_SECRET_KEY`, read at start, instead of the variable; the "
        "local stack generates the key at its first start and passes this file (pagos gets "
        "the same one as `PAGOS_GATEWAY_SECRET_KEY_FILE`; `make credentials` prints it)."),
    env("GATEWAY_PORT", "int", "`8010`",
        "Port the fake gateway listens on; the local stack passes on its own `GATEWAY_PORT`."),
    env("GATEWAY_KEEP_ALIVE_S", "int", "`75`",
        "How long an idle keep-alive connection stays open: longer than its clients keep one."),
    env("GATEWAY_LEDGER_PATH", "path", "`.local/gateway/ledger.sqlite3`",
        "SQLite file of the gateway's ledger (charges, refunds, idempotency keys), relative "
        "to the working directory; the local stack puts it under `$SAGA_STATE_DIR/gateway`."),
    env("GATEWAY_SLOW_SECONDS", "float", "`35`",
        "How long the answer to a charge with the token `tok_slow` is held back (the charge "
        "is made at once): longer than pagos' gateway timeout, for the timeout tests."),
)

LOCAL_STACK = (
    env("SAGA_STATE_DIR", "path", "`.local` in the checkout",
        "Where the stack keeps its data, its logs (`logs/`) and its pid files (`run/`); the "
        "tests and the benchmark read it to find them."),
    env("SAGA_KAFKA_HOME", "path", "`$SAGA_STATE_DIR/kafka`",
        "Kafka's jars (fetched from Maven Central on the first start), configuration and "
        "data."),
    env("PG_PORT", "int", "`25432`",
        "PostgreSQL's port; below the ports the kernel hands out to outgoing connections, "
        "which could take it while PostgreSQL is down."),
    env("PG_DATABASE", "str", "`saga`", "The database that holds every service's schema."),
    env("PG_ADMIN_USER", "str", "`saga_admin`",
        "PostgreSQL's administrator role: creates the services' roles and schemas."),
    env("PG_ADMIN_PASSWORD", "str", GENERATED.format(secret="postgres-admin"),
        "Password of `PG_ADMIN_USER`, given to the cluster each time the stack starts "
        "PostgreSQL; never passed to a service."),
    env("<SERVICE>_OWNER_PASSWORD", "str", GENERATED.format(secret="<service>-owner"),
        "Password of a service's schema owner role, which runs its migrations (a step before "
        "the service starts, which never gets it); `<SERVICE>` is `PEDIDOS`, `INVENTARIO` or "
        "`PAGOS`."),
    env("<SERVICE>_APP_PASSWORD", "str", GENERATED.format(secret="<service>-app"),
        "Password of a service's application role, in the `DATABASE_URL` the service gets."),
    env("<READER>_READER_PASSWORD", "str", GENERATED.format(secret="<reader>-reader"),
        "Password of a read views' consumer's login role, which reads every service's "
        "published views and nothing else (`make credentials`, `postgres.reader_dsns`); "
        "`<READER>` is `CONSOLE`, `SAGACTL` or `GRAFANA`."),
    env("KAFKA_PORT", "int", "`9092`",
        "Port of Kafka's client listener (of its first broker; broker k listens on this + "
        "100·(k−1))."),
    env("KAFKA_CONTROLLER_PORT", "int", "`9093`",
        "Port of Kafka's KRaft controller listener (of its first broker; broker k: this + "
        "100·(k−1))."),
    env("KAFKA_TLS_PORT", "int", "`9097`",
        "Port of Kafka's TLS listener (SASL/SCRAM over TLS, `SASL_SSL`; broker k: this + "
        "100·(k−1)), signed by the stack's own CA (`$SAGA_STATE_DIR/secrets/kafka-ca.pem`, for "
        "`KAFKA_SSL_CAFILE`); only when Kafka authenticates."),
    env("SAGA_KAFKA_AUTH", "flag", "`1`",
        "Kafka authenticates every client (SASL/SCRAM-SHA-512, passwords generated into "
        "`$SAGA_STATE_DIR/secrets/kafka-*`) and authorizes it by ACLs; each service gets its "
        "own principal, the tests and tools the admin. `0`: PLAINTEXT with no ACLs, for "
        "debugging with clients that cannot authenticate (the data directory must then be "
        "formatted anew to turn it back on)."),
    env("SAGA_KAFKA_TLS", "flag", UNSET,
        "`1`: the services reach Kafka on its TLS listener instead of the SASL_PLAINTEXT one "
        "(not with `SAGA_NETPROXY=1`, whose proxied listeners are SASL_PLAINTEXT)."),
    env("SAGA_KAFKA_BROKERS", "int", "`1`",
        "Kafka brokers the stack runs, each also a voter of the controller quorum (3: one "
        "may be lost); with 3 or more its topics default to a replication factor of 3 and "
        "`min.insync.replicas` 2 (see Kafka topics), Kafka's internal topics too."),
    env("SAGA_REPLICAS", "int", "`1`",
        "Instances of each service; instance k listens on the service's port + 100·(k−1) "
        "(pedidos 8001, 8101, 8201…), each a full member (HTTP, consumer, relay candidate, "
        "periodic jobs). More than `KAFKA_TOPIC_PARTITIONS` leaves consumers without a "
        "partition."),
    env("SAGA_PG_TLS", "flag", UNSET,
        "`1`: PostgreSQL speaks TLS with a certificate of a CA the stack makes (beside the "
        "cluster's data, `tls/ca.crt`), and the services and migrations connect with "
        "`sslmode=verify-full` and that CA. Takes effect when PostgreSQL starts (`make down` "
        "first)."),
    env("GATEWAY_PORT", "int", "`8010`", "Port of the fake gateway."),
    env("IDENTITY_PORT", "int", "`8020`",
        "Port of the local identity provider; the services trust `http://127.0.0.1:<port>` as "
        "their issuer."),
    env("CONSOLA_PORT", "int", "`8030`",
        "Port of the operator console; it signs operators in through the local identity "
        "provider with `http://127.0.0.1:<port>/auth/callback` as its redirect URI."),
    env("PEDIDOS_PORT", "int", "`8001`", "HTTP port of pedidos."),
    env("INVENTARIO_PORT", "int", "`8002`", "HTTP port of inventario."),
    env("PAGOS_PORT", "int", "`8003`", "HTTP port of pagos."),
    env("PROMETHEUS_PORT", "int", "`9090`", "Port of Prometheus, when the stack starts it."),
    env("REGISTRY_PORT", "int", "`8081`",
        "Port of the schema registry's REST APIs (Apicurio Registry: `/apis/registry/v3`, and "
        "the Confluent-compatible `/apis/ccompat/v7`)."),
    env("REGISTRY_MANAGEMENT_PORT", "int", "`9081`",
        "Port of the schema registry's health checks (`/health/ready`) and metrics "
        "(`/metrics`)."),
    env("REGISTRY_START_TIMEOUT", "float", "`180`",
        "Seconds `up` waits for the schema registry to answer its readiness check."),
    env("REGISTRY_OWNER_PASSWORD", "str", GENERATED.format(secret="registry-owner"),
        "Password of `registry_owner`, the role the schema registry runs as, owner of its "
        "schema `registry` (it makes its tables itself)."),
    env("REGISTRY_<PRINCIPAL>_PASSWORD", "str", GENERATED.format(secret="registry-<principal>"),
        "Password of a schema registry principal (HTTP basic authentication): `DEPLOYER`, who "
        "registers the schemas and their rules, or `READER`, who reads them (the services, "
        "the operators); the registry's settings hold only its digest."),
    env("WITH_PROMETHEUS", "flag", UNSET,
        "`1`: `up` and `run` also start Prometheus scraping the services, as `--prometheus` "
        "does."),
    env("SAGA_NETPROXY", "flag", UNSET,
        "`1`: every service reaches PostgreSQL, Kafka and the gateway through the chaos "
        "suite's TCP proxy, each instance through routes of its own, which can then add "
        "latency, black holes, resets and answers that are not the gateway's (`make chaos` "
        "sets it)."),
    env("STACK_UP_TIMEOUT", "float", "`120`",
        "Read, but not used: each part has a wait of its own."),
    env("STACK_PG_CRASH_WAIT", "float", "`60`",
        "Seconds `up` waits for what a crashed PostgreSQL left behind (orphaned backends, "
        "its port) to go away."),
    env("STACK_LOG_ROTATE_MB", "int", "`200`",
        "A part's log larger than this is moved aside to `<part>.log.1` when the part "
        "starts."),
    env("RESTORE_TARGET_TIME", "str", UNSET,
        "`make restore`: the time PostgreSQL is recovered to (ISO 8601, UTC unless it names "
        "its offset); unset or `latest`: the latest the archive and the old cluster's WAL "
        "reach."),
    env("SAGA_BACKUP_KEEP", "int", "`2`",
        "`make backup`: how many base backups are kept, with the archived WAL they need."),
    env("SAGA_RESTORE_TIMEOUT", "float", "`600`",
        "`make restore`: seconds PostgreSQL may take to replay the archive up to the target."),
)

CREDENTIALS = (
    env("KAFKA_SECURITY_PROTOCOL", "str", "`PLAINTEXT`",
        "The `kafka.security_protocol` that `make credentials` prints."),
    env("KAFKA_SASL_MECHANISM", "str", UNSET,
        "The `kafka.sasl_mechanism` that `make credentials` prints (null when unset)."),
)

SAGACTL = (
    env("SAGACTL_DATABASE_URL", "URL",
        "in a checkout, the local stack's `sagactl_reader` (`make credentials`, "
        "`postgres.reader_dsns.sagactl`)",
        "PostgreSQL URL sagactl reads with: a reader role, which reads the services' published "
        "views (`<service>_read`) and nothing else. Installed outside a checkout, sagactl "
        "needs it."),
    env("SAGACTL_TOKEN", "str",
        "in a checkout, one the local identity provider hands to the login name (`$USER`) "
        "with the role `operator`",
        "The operator's bearer token sagactl's actions (`cancel`, `retry`, "
        "`resolve-payment`) call the services' APIs with; the services audit its subject as "
        "who acted. Never printed."),
    env("SAGACTL_PEDIDOS_URL", "URL", "`http://127.0.0.1:8001` (the local stack's)",
        "pedidos' API, for `cancel` and `retry`."),
    env("SAGACTL_PAGOS_URL", "URL", "`http://127.0.0.1:8003` (the local stack's)",
        "pagos' API, for `resolve-payment`."),
    env("SAGACTL_SIGNING_KEY_FILE", "path",
        "`$SAGA_STATE_DIR/secrets/operator-signing.key` of the checkout sagactl runs from",
        "The operator's Ed25519 private key (PKCS#8 PEM) `sagactl replay` signs replays with; "
        "the local stack makes it at its first start. The services believe a replay's "
        "`X-Replay-For` only with its signature (`SAGA_OPERATOR_PUBLIC_KEYS`)."),
    env("SAGACTL_TOKEN", "JWT",
        "in a checkout, one from the local identity provider for `$USER` with the role "
        "`operator`",
        "The operator's bearer token for the services' APIs (dead-letter actions: archive, "
        "record a replay, report a forgery); its `sub` is who the audit says acted."),
    env("SAGACTL_PEDIDOS_URL", "URL", "`http://127.0.0.1:$PEDIDOS_PORT`",
        "pedidos' API, as sagactl reaches it."),
    env("SAGACTL_INVENTARIO_URL", "URL", "`http://127.0.0.1:$INVENTARIO_PORT`",
        "inventario's API, as sagactl reaches it."),
    env("SAGACTL_REGISTRY_URL", "URL",
        "in a checkout, the local stack's (`http://127.0.0.1:$REGISTRY_PORT/apis/registry/v3`)",
        "The schema registry's REST API (v3) `sagactl schemas` speaks to."),
    env("SAGACTL_REGISTRY_USERNAME", "str",
        "in a checkout, the local stack's `deployer` (`schemas register`) or `reader` "
        "(`schemas catalog`)",
        "Who `sagactl schemas` is to the registry (HTTP basic authentication)."),
    env("SAGACTL_REGISTRY_PASSWORD", "str", "in a checkout, the local stack's",
        "The password of `SAGACTL_REGISTRY_USERNAME`. Never printed."),
    env("SAGACTL_SCHEMA_RETIRE_UNUSED_DAYS", "float", "`30`",
        "How many days no service may have produced or consumed a schema version for "
        "`sagactl schemas retire` to retire it (`--unused-days` for one run)."),
    env("SAGACTL_PAGOS_URL", "URL", "`http://127.0.0.1:$PAGOS_PORT`",
        "pagos' API, as sagactl reaches it."),
)

BENCH = (
    env("BENCH_QUICK", "flag", UNSET,
        "`1`: a short run to try the benchmark out; it changes the defaults of the variables "
        "below (shown in parentheses)."),
    env("BENCH_RATES", "list of float", "`10,50,100,200` (`10,50`)",
        "Open-loop arrival rates to measure, in orders a second."),
    env("BENCH_SECONDS", "float", "`10` (`4`)", "Length of each open-loop step, in seconds."),
    env("BENCH_CLOSED_LOOP", "list of int", "`2,4,8,16,32,64` (`4,16`)",
        "Closed-loop client counts to measure."),
    env("BENCH_CLOSED_LOOP_MAX", "int", "`512` (`16`)",
        "Past the listed counts, the closed loop doubles its clients until p99 passes 1 s, up "
        "to this many."),
    env("BENCH_PRODUCTS", "int", "`50`", "Products the run creates and its orders draw from."),
    env("BENCH_PEERS", "list", "`dbos,dbos_async,dbos_per_core,dbos_queue`",
        "The DBOS shapes measured side by side with this stack (`tools/peer-dbos`); empty: "
        "none, and the goals against a peer are not measured."),
    env("BENCH_ROUNDS", "int", "`2` (`1`)",
        "Rounds of the comparison: each runs every system in a block, in alternating order."),
    env("BENCH_STRATEGIES", "list", "`check_then_pay,reserve_then_pay,auto`",
        "The allocation strategies of the burst contention scenario and of its throughput "
        "without contention; the run fails at once if inventario refuses one."),
    env("BENCH_BURST_ORDERS", "int", "`40` (`20`)",
        "Orders sent at once in each burst (units: 1.0, 0.5, 0.25 and 0.1 of this)."),
    env("BENCH_BURST_ROUNDS", "int", "`2` (`1`)",
        "Bursts of each strategy at each ratio, in alternating order."),
)

BENCH_PEER = (
    env("BENCH_PEER_PORT", "int", "`8040`",
        "Where the benchmark starts the DBOS peer's `POST /orders` (127.0.0.1)."),
)

COMPOSE = (
    env("PEDIDOS_HOST_PORT", "int", "`8001`", "Host port (on 127.0.0.1) of pedidos' API."),
    env("INVENTARIO_HOST_PORT", "int", "`8002`", "Host port (on 127.0.0.1) of inventario's API."),
    env("PAGOS_HOST_PORT", "int", "`8003`", "Host port (on 127.0.0.1) of pagos' API."),
    env("GATEWAY_HOST_PORT", "int", "`8010`", "Host port (on 127.0.0.1) of the fake gateway."),
    env("IDENTITY_HOST_PORT", "int", "`8020`", "Host port (on 127.0.0.1) of the identity provider."),
    env("CONSOLA_HOST_PORT", "int", "`8030`", "Host port (on 127.0.0.1) of the operator console."),
    env("POSTGRES_HOST_PORT", "int", "`25432`", "Host port (on 127.0.0.1) of PostgreSQL."),
    env("KAFKA_HOST_PORT", "int", "`9092`",
        "Host port (on 127.0.0.1) of Kafka's HOST listener, which advertises it."),
    env("PROMETHEUS_HOST_PORT", "int", "`9090`", "Host port (on 127.0.0.1) of Prometheus."),
    env("REGISTRY_HOST_PORT", "int", "`8081`",
        "Host port (on 127.0.0.1) of the schema registry's REST APIs."),
    env("SAGA_COMPOSE_ENV_FILE", "path", "`.env`",
        "The file of passwords and keys podman-compose reads (`python -m compose_stack dotenv "
        "PATH` makes one)."),
    env("SAGA_COMPOSE_UP_TIMEOUT", "float", "`900`",
        "Seconds `python -m compose_stack up` waits for every part to be healthy (a step that "
        "fails ends the wait at once)."),
    env("SAGA_DEBIAN_MIRROR", "URL", "`http://deb.debian.org/debian`",
        "The Debian mirror the offline base image is made from (`debootstrap`)."),
)

REGISTRY_IMAGE = (
    env("REGISTRY_DATASOURCE_URL", "URL", "required",
        "The JDBC URL of its PostgreSQL database (`jdbc:postgresql://postgres:5432/saga`; "
        "it adds `currentSchema=registry`), with no user or password."),
    env("REGISTRY_DATASOURCE_USERNAME", "str", "required",
        "The role it connects as, owner of its schema (`registry_owner`)."),
    env("REGISTRY_DATASOURCE_PASSWORD", "str", "required",
        "That role's password."),
    env("REGISTRY_DEPLOYER_PASSWORD", "str", "required",
        "Password of the principal `deployer`, who registers the schemas and their rules."),
    env("REGISTRY_READER_PASSWORD", "str", "required",
        "Password of the principal `reader`, who reads them."),
)

CHAOS = (
    env("CHAOS_RATE", "float", "`20`", "Orders a second during each scenario (`--rate`)."),
    env("CHAOS_SEEDS", "int", "`20`",
        "Without `--seed` or `--scripted`, the random schedules of seeds 1 to this are run, "
        "and every scripted scenario."),
    env("CHAOS_STRATEGIES", "list", "`check_then_pay,reserve_then_pay,auto`",
        "The allocation strategies a scenario's products take in turn (the tests' scenarios "
        "that use the chaos load too); a stack whose inventario refuses one fails the run."),
    env("NETPROXY_BASE_PORT", "int", "`15400`",
        "Control port of the TCP proxy; the ports it forwards follow it (pedidos' PostgreSQL "
        "route is this + 11, the second pedidos instance's this + 111)."),
    env("KAFKA_PROXIED_LISTENER_BASE", "int", "`9094`",
        "First of the Kafka listeners the proxy forwards to: on every broker one per instance "
        "of each service, each advertised at that instance's route to that broker (+10 per "
        "instance, +100 per broker)."),
)

COMPONENTS = (
    Component(
        "Every service",
        "Read by pedidos, inventario and pagos when they start. A value that does not parse, or "
        "falls outside its limits, stops the service with a message that names the variable.",
        (Table("Process", ServiceSettings),
         Table("Migrations", MigrationSettings),
         Table("HTTP limits", HttpLimits),
         Table("Messaging: outbox relay, inbox, consumer", MessagingSettings),
         Table("Authentication: the OIDC issuer trusted", AuthSettings),
         Table("Schema registry: the event schemas validated against", SchemaRegistrySettings),
         Table("Schema versions: use, deprecation", SchemaVersionSettings),
         Table("Tracing", environment=TRACING,
               read_in=("libs/sagakit/src/sagakit/observability/tracing.py",)))),
    Component("pedidos",
              "The saga's deadlines, judged by the database clock "
              "([standard](standard.md#timeouts-of-each-service)), and the limits "
              "of `POST /orders` (per customer, and against card testing per card). A timeout below "
              "its minimum stops pedidos unless `SAGA_ALLOW_UNSAFE_LIMITS` is set; why the "
              "allocation step may take 15 s: [ADR 0001](adr/0001-allocation-step-timeout.md).",
              (Table("Saga deadlines", PedidosSettings),
               Table("Payment token sealing", PaymentTokenSealing),
               Table("Fingerprint key", FingerprintKey))),
    Component("inventario", "Limits of inventario's database work "
              "([standard](standard.md#timeouts-of-each-service)).",
              (Table("Database limits", InventarioSettings),)),
    Component("pagos", "How pagos calls the payment gateway "
              "([standard](standard.md#timeouts-of-each-service)), the secret key it "
              "calls it with, and the keys it opens the payment tokens pedidos sealed with.",
              (Table("Payment gateway", PagosSettings),
               Table("Gateway secret key", GatewaySecretKey),
               Table("Payment token keys", PaymentTokenKeys))),
    Component("Fake payment gateway", "Read by `python -m fake_gateway`.",
              (Table("Gateway", environment=FAKE_GATEWAY,
                     read_in=("services/fake-gateway/src/fake_gateway/__main__.py",
                              "services/fake-gateway/src/fake_gateway/app.py",
                              "services/fake-gateway/src/fake_gateway/secret_key.py")),)),
    Component("Identity provider", "Read by `python -m identity_provider`, the local stack's "
              "development stand-in for an OIDC issuer.",
              (Table("Identity provider", IdentityProviderSettings),)),
    Component("Operator console", "Read by `python -m consola`, with the authentication "
              "variables of every service above (`AUTH_ISSUER`, `AUTH_AUDIENCE`...): the issuer "
              "it signs operators in through and whose tokens it verifies as the services do; "
              "and with the Kafka client variables (`KAFKA_BOOTSTRAP_SERVERS`, "
              "`KAFKA_SASL_USERNAME`...) of the `operator` principal, which its replays of dead "
              "letters are published as.",
              (Table("Operator console", ConsolaSettings),)),
    Component(
        "Local stack",
        "Read by `python -m local_stack` (`make up`, `make run`, `make test`). It gives "
        "each service `SERVICE_NAME`, `HTTP_HOST`, `HTTP_PORT`, `DATABASE_URL`, "
        "`KAFKA_BOOTSTRAP_SERVERS`, `GATEWAY_URL`, `AUTH_ISSUER`, `AUTH_AUDIENCE` (its identity "
        "provider's) and `SAGA_OPERATOR_PUBLIC_KEYS` (the public halves of the operator keys it "
        "makes at its first start, sagactl's and the console's) from these, the identity "
        "provider the key it signs with (made at the first start too), the operator console "
        "the file of its session key (`CONSOLA_SESSION_SECRET_FILE`, made then too), the file "
        "of its replay-signing key (`CONSOLA_SIGNING_KEY_FILE`), the `operator` Kafka "
        "principal's `KAFKA_*`, the services' URLs and "
        "`console_reader`'s URL (`CONSOLA_DATABASE_URL`), and pedidos and "
        "pagos the files of the payment token key pair it makes at its first start "
        "(`PEDIDOS_PAYMENT_TOKEN_SEAL_KEY_FILE`, `PAGOS_PAYMENT_TOKEN_OPEN_KEYS_FILE`, under "
        "`$SAGA_STATE_DIR/secrets`), and pagos and the fake gateway the file of the gateway's "
        "secret key it makes then too (`PAGOS_GATEWAY_SECRET_KEY_FILE`, "
        "`GATEWAY_SECRET_KEY_FILE`), and pedidos the file of its fingerprint key, made then "
        "too (`PEDIDOS_FINGERPRINT_KEY_FILE`); every other variable in its environment but the database "
        "passwords reaches the services as it is (`deploy/local/test.env` holds the test "
        "suite's). The tests, the benchmark, the chaos suite and sagactl read the same ports, "
        "and the passwords the stack generated, to find the stack.",
        (Table("Stack", environment=LOCAL_STACK,
               read_in=("tools/local-stack/src/local_stack/settings.py",
                        "tools/local-stack/src/local_stack/passwords.py",
                        "tools/local-stack/src/local_stack/registry/principals.py")),
         Table("`make credentials`", environment=CREDENTIALS,
               read_in=("tools/local-stack/src/local_stack/credentials.py",)))),
    Component(
        "Every Kafka client",
        "Read by the services, `sagactl`, the benchmark, the chaos suite and the tests: where "
        "Kafka is and which principal the client is. The local stack sets them for each service "
        "(its own principal); the tests speak as the stack's admin principal and `sagactl` "
        "as its `operator` principal (replays) unless `KAFKA_SECURITY_PROTOCOL` or "
        "`KAFKA_SASL_USERNAME` is set.",
        (Table("Kafka client", KafkaClientSettings),)),
    Component(
        "Kafka topics",
        "Read by `sagactl topics` and the local stack, which make the saga's topics with them "
        "(a topic that exists is left as it is; `sagactl topics` says where it differs). The "
        "local stack's defaults follow `SAGA_KAFKA_BROKERS`: 3 and 2 on three brokers.",
        (Table("Topics", TopicSettings),)),
    Component("sagactl", "Read by `sagactl`, the operator's command line, with the Kafka "
              "client's variables above for `sagactl replay` and `sagactl topics`.",
              (Table("sagactl", environment=SAGACTL,
                     read_in=("tools/sagactl/src/sagactl/cli.py",
                              "tools/sagactl/src/sagactl/connection.py",
                              "tools/sagactl/src/sagactl/operator_access.py",
                              "tools/sagactl/src/sagactl/schema_registry.py")),)),
    Component("Benchmark", "Read by `make bench` (`python -m bench.run`).",
              (Table("Benchmark", environment=BENCH, read_in=("tools/bench/src/bench/run.py",
                                                               "tools/bench/src/bench/burst.py")),
               Table("The benchmark's DBOS peer", environment=BENCH_PEER,
                     read_in=("tools/bench/src/bench/systems.py",)),
               Table("The DBOS peer's processes (`python -m peer_dbos`)", PeerSettings))),
    Component("Compose stack",
              "Read by `python -m compose_stack` (docker-compose.yml under podman, "
              "docs/deploy.md); the host ports are docker-compose.yml's variables too, and so "
              "are the images (`POSTGRES_IMAGE`, `KAFKA_IMAGE`, `PROMETHEUS_IMAGE`, "
              "`PYTHON_IMAGE`), which it sets to the images it builds offline unless they are "
              "set.",
              (Table("Compose stack", environment=COMPOSE,
                     read_in=("tools/compose-stack/src/compose_stack/settings.py",
                              "tools/compose-stack/src/compose_stack/cli.py")),)),
    Component("Schema registry image",
              "Read by the schema registry's image (`deploy/docker/registry.Dockerfile`, its "
              "`deploy/docker/registry/start.py`), as docker-compose.yml and the Kubernetes "
              "manifests run it, all written into its settings file at each start (the "
              "principals' passwords as digests); its other settings are the local stack's.",
              (Table("Schema registry image", environment=REGISTRY_IMAGE,
                     read_in=("deploy/docker/registry/start.py",)),)),
    Component("Chaos suite", "Read by `make chaos` (`python -m chaos`) and its TCP proxy.",
              (Table("Chaos", environment=CHAOS,
                     read_in=("tools/chaos/src/chaos/__main__.py",
                              "tools/chaos/src/chaos/scenario.py",
                              "tools/netproxy/src/netproxy/layout.py")),)),
    Component("Fault plugin",
              "Read by a service whose `SAGA_PLUGINS` names `saga_harness.fault_plugin`, as the "
              "crash and chaos tests restart one (`fault_plugin.env`); never in production, "
              "whose images do not contain it.",
              (Table("Injected faults", FaultSettings),)),
)


# ------------------------------------------------------------------ settings classes


def env_name(settings: type[BaseSettings], name: str, field: FieldInfo) -> str:
    """The variable pydantic-settings reads the field from (it ignores case)."""
    alias = field.validation_alias
    if alias is None:
        return f"{settings.model_config.get('env_prefix', '')}{name}".upper()
    if not isinstance(alias, str):
        raise TypeError(f"{settings.__name__}.{name}: only a plain string alias is documented")
    return alias.upper()


def type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args if a is not type(None))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return f"list of {type_name(args[0])}"
    return str(getattr(annotation, "__name__", annotation))


def value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    if isinstance(v, tuple | list):
        return ",".join(value(x) for x in v)
    return str(v)


def limits(field: FieldInfo) -> list[str]:
    out = []
    for item in field.metadata:
        for attr, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            bound = getattr(item, attr, None)
            if bound is not None:
                out.append(f"{sign} {value(bound)}")
    return out


def settings_variable(settings: type[BaseSettings], name: str, field: FieldInfo) -> Variable:
    if field.default is PydanticUndefined:
        default = "required"
    elif field.default is None:
        default = UNSET
    else:
        default = f"`{value(field.default)}`"
    kind = ", ".join([type_name(field.annotation), *limits(field)])
    return Variable(env_name(settings, name, field), kind, default, field.description or "")


# ------------------------------------------------------------------ rendering


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    out = [
        "# Configuration", "",
        f"Generated by `{COMMAND}` (`make docs`) from the settings classes and the tables in "
        "that file; do not edit by hand.", "",
        "Every setting is an environment variable. The services' settings are "
        "pydantic-settings classes: their names ignore case, a bool is `true`/`false` (or "
        "`1`/`0`), a list is comma-separated, and the type column shows a value's limits. The "
        "other variables are read as written; a flag is on only when set to `1`.", "",
    ]
    out += [f"- [{c.title}](#{_anchor(c.title)})" for c in COMPONENTS]
    out.append("")
    for component in COMPONENTS:
        out += [f"## {component.title}", "", component.intro, ""]
        for table in component.tables:
            if len(component.tables) > 1:
                out += [f"### {table.title}", ""]
            out += [table.source(), "",
                    "| Variable | Type | Default | Description |", "|---|---|---|---|"]
            out += [f"| `{v.name}` | {_cell(v.type)} | {_cell(v.default)} | "
                    f"{_cell(v.description)} |" for v in table.variables()]
            out.append("")
    return "\n".join(out)


def _anchor(title: str) -> str:
    return "-".join("".join(c for c in title.lower() if c.isalnum() or c == " ").split())


def variables() -> Iterator[tuple[Table, Variable]]:
    for component in COMPONENTS:
        for table in component.tables:
            for variable in table.variables():
                yield table, variable


def settings_classes() -> list[type[BaseSettings]]:
    return [t.settings for c in COMPONENTS for t in c.tables if t.settings is not None]


# What a payment that succeeds just before pedidos' payment deadline may still take to reach
# inventario (the relay, the broker, a consumer's retry), and how far the two databases' clocks
# may differ: pedidos ends the payment step this long before the reservation at the latest.
RESERVATION_MARGIN_S = PEDIDOS_RESERVATION_MARGIN_S


def settings_conflicts(pedidos: PedidosSettings, inventario: InventarioSettings) -> list[str]:
    """Settings of two components that must agree and do not (none: an empty list). A
    reservation must cover the whole payment step it waits for, which pedidos may start as
    late as the end of the validation step the reservation was taken in: otherwise pedidos
    cuts the payment step short, to end ``RESERVATION_MARGIN_S`` before the reservation, and
    sagas time out that a full step would have let pay."""
    needed = (pedidos.validation_timeout_s + pedidos.payment_timeout_s
              + RESERVATION_MARGIN_S)
    if inventario.reservation_ttl_s < needed:
        return [f"INVENTARIO_RESERVATION_TTL_S ({inventario.reservation_ttl_s:g}) is shorter "
                f"than PEDIDOS_VALIDATION_TIMEOUT_S ({pedidos.validation_timeout_s:g}) plus "
                f"PEDIDOS_PAYMENT_TIMEOUT_S ({pedidos.payment_timeout_s:g}) plus "
                f"{RESERVATION_MARGIN_S:g} s: a saga reserved late in its validation step would "
                "have its payment step cut short"]
    return []


def main(argv: list[str]) -> int:
    text = render()
    conflicts = settings_conflicts(PedidosSettings(), InventarioSettings())
    for conflict in conflicts:
        print(conflict, file=sys.stderr)
    if conflicts:
        return 1
    if argv[:1] == ["--check"]:
        if TARGET.read_text() != text:
            print(f"{TARGET.relative_to(ROOT)} is out of date: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    target = Path(argv[0]) if argv else TARGET
    target.write_text(text)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

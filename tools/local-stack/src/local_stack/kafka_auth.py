"""Who is who to the local stack's Kafka. Every client authenticates with SASL/SCRAM-SHA-512 as a
principal of its own (a service; ``operator``, the one replays of dead letters are published
under; or ``admin`` for the stack itself and the tests) and may do only what the ACLs below let
it: a service writes its own topic and its dead-letter topic, reads the topics it consumes and
uses only its own consumer group; the operator reads and writes the topics a replay can go to
(those some service consumes: ``saga_contracts.topology``), with no consumer group (a replay
re-reads its original by assigning the partition) and nothing else. With SAGA_KAFKA_AUTH=0 Kafka
runs PLAINTEXT with no ACLs (a debugging aid).

The passwords are generated once into ``$SAGA_STATE_DIR/secrets/kafka-<principal>``
(``local_stack.secrets``) and the SCRAM credentials are written into the metadata log when the
storage is formatted (KIP-900). KRaft's controller listener cannot use SCRAM (its credentials
live in the metadata the controller serves), so it uses SASL/PLAIN with a generated password of
its own: a PLAINTEXT controller listener would have to make ANONYMOUS a super user, and any
local process could then administer the cluster through it (KIP-919's bootstrap controllers).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from local_stack import kafka_tls, secrets
from local_stack.settings import (
    KAFKA_AUTH,
    KAFKA_BOOTSTRAP,
    KAFKA_DIR,
    KAFKA_TLS,
    KAFKA_TLS_BOOTSTRAP,
    NETPROXY,
    ROOT,
    SERVICE_PORTS,
)
from saga_contracts import topics, topology
from sagakit.settings import KafkaClientSettings

ADMIN = "admin"
OPERATOR = "operator"
CONTROLLER = "controller"
TLS_LISTENER = "TLS"  # SASL_SSL, on KAFKA_TLS_PORT (local_stack.kafka_tls)
MECHANISM = "SCRAM-SHA-512"
SERVICES = tuple(SERVICE_PORTS)

# The topic each service publishes its events on (the x-topic of the events it produces), and
# the topics its consumer subscribes to (those of the events it consumes, as the contract's
# topology names them: deploy/tests/test_kafka_acls.py holds it to services/*/app.py).
WRITES = {"pedidos": topics.ORDER_EVENTS, "inventario": topics.INVENTORY_EVENTS,
          "pagos": topics.PAYMENT_EVENTS}
READS = {service: tuple(sorted(topology.topics_read(service))) for service in SERVICES}
# Written when the storage is formatted with the SCRAM credentials: a data directory formatted
# before SAGA_KAFKA_AUTH was set has no users, and its broker would refuse everyone.
USERS_MARKER = "scram-users"
ACL_TOOL = ROOT / "deploy/local/kafka/StackAcls.java"


@dataclass(frozen=True)
class Acl:
    principal: str
    resource_type: str  # Kafka's ResourceType: TOPIC, GROUP
    name: str
    operation: str  # Kafka's AclOperation: READ, WRITE...

    def line(self) -> str:
        return f"User:{self.principal} {self.resource_type} LITERAL {self.name} {self.operation}"


def acls() -> list[Acl]:
    """Everything a service may do. READ and WRITE imply DESCRIBE; no IDEMPOTENT_WRITE on the
    cluster: since Kafka 3.0 (KIP-679) WRITE on a topic lets an idempotent producer start."""
    out: list[Acl] = []
    for service in SERVICES:
        for topic in (WRITES[service], topics.dead_letter_topic(service)):
            out.append(Acl(service, "TOPIC", topic, "WRITE"))
        out += [Acl(service, "TOPIC", topic, "READ") for topic in READS[service]]
        # The consumer's group is the service's name (sagakit.consumer.loop).
        out.append(Acl(service, "GROUP", service, "READ"))
    for topic in sorted(topology.all_replayable_topics()):
        out += [Acl(OPERATOR, "TOPIC", topic, "READ"), Acl(OPERATOR, "TOPIC", topic, "WRITE")]
    return out


def password(principal: str) -> str:
    return secrets.password(f"kafka-{principal}")


def client_settings(principal: str, bootstrap: str = KAFKA_BOOTSTRAP, *,
                    tls: bool = False) -> KafkaClientSettings:
    """How ``principal`` reaches the stack's Kafka: SASL/SCRAM on ``bootstrap`` or, with
    ``tls``, over TLS on the TLS listener, trusting the stack's CA."""
    if not KAFKA_AUTH:
        return KafkaClientSettings(kafka_bootstrap_servers=bootstrap)
    password_ = password(principal)
    if tls:
        return KafkaClientSettings(kafka_bootstrap_servers=KAFKA_TLS_BOOTSTRAP,
                                   kafka_security_protocol="SASL_SSL",
                                   kafka_sasl_mechanism=MECHANISM, kafka_sasl_username=principal,
                                   kafka_sasl_password=password_,
                                   kafka_ssl_cafile=str(kafka_tls.ca_file()))
    return KafkaClientSettings(kafka_bootstrap_servers=bootstrap,
                               kafka_security_protocol="SASL_PLAINTEXT",
                               kafka_sasl_mechanism=MECHANISM, kafka_sasl_username=principal,
                               kafka_sasl_password=password_)


def admin_client_settings() -> KafkaClientSettings:
    """The stack's own client (topics, ACLs): the admin principal, a super user."""
    return client_settings(ADMIN)


def service_env(service: str) -> dict[str, str]:
    """The ``KAFKA_*`` a service (or the console, ``OPERATOR``) starts with: its own
    principal, whatever the shell that started the stack had set; with SAGA_KAFKA_TLS=1, on the
    TLS listener."""
    if KAFKA_TLS and not KAFKA_AUTH:
        raise SystemExit("[stack] SAGA_KAFKA_TLS=1 needs Kafka's authentication "
                         "(SAGA_KAFKA_AUTH=0 turns both off)")
    if KAFKA_TLS and NETPROXY:
        raise SystemExit("[stack] SAGA_KAFKA_TLS=1 and SAGA_NETPROXY=1 do not go together: the "
                         "chaos suite's proxy listeners are SASL_PLAINTEXT")
    settings = client_settings(service, tls=KAFKA_TLS)
    env = {"KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
           "KAFKA_SECURITY_PROTOCOL": settings.kafka_security_protocol}
    if settings.kafka_sasl_password is not None:
        env |= {"KAFKA_SASL_MECHANISM": settings.kafka_sasl_mechanism,
                "KAFKA_SASL_USERNAME": service,
                "KAFKA_SASL_PASSWORD": settings.kafka_sasl_password.get_secret_value()}
    if settings.kafka_ssl_cafile is not None:
        env["KAFKA_SSL_CAFILE"] = settings.kafka_ssl_cafile
    return env


def client_protocol() -> str:
    return "SASL_PLAINTEXT" if KAFKA_AUTH else "PLAINTEXT"


def listeners() -> list[tuple[str, str]]:
    """(name, security protocol) of the client listeners beyond ``CLIENT`` (and the chaos
    suite's proxied ones): the TLS one, when clients authenticate."""
    return [(TLS_LISTENER, "SASL_SSL")] if KAFKA_AUTH else []


def broker_properties(proxied_listeners: list[str]) -> str:
    """The broker's authentication and authorization settings (they hold passwords: the file
    they go into is 0600). Every SASL listener needs a JAAS entry, even one that only checks
    SCRAM credentials; the client listener's also names the broker's own principal."""
    if not KAFKA_AUTH:
        return "# No authentication: SAGA_KAFKA_AUTH=0 (local_stack/kafka_auth.py).\n"
    plain = (f'org.apache.kafka.common.security.plain.PlainLoginModule required '
             f'username="{CONTROLLER}" password="{password(CONTROLLER)}" '
             f'user_{CONTROLLER}="{password(CONTROLLER)}";')
    scram = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
             f'username="{ADMIN}" password="{password(ADMIN)}";')
    return "\n".join([
        "# SASL/SCRAM on every client listener, ACLs (local_stack/kafka_auth.py).",
        f"sasl.enabled.mechanisms={MECHANISM}",
        f"sasl.mechanism.inter.broker.protocol={MECHANISM}",
        f"listener.name.client.{MECHANISM.lower()}.sasl.jaas.config={scram}",
        *(f"listener.name.{name.lower()}.{MECHANISM.lower()}.sasl.jaas.config={scram}"
          for name in [*proxied_listeners, TLS_LISTENER]),
        *kafka_tls.listener_properties(TLS_LISTENER),
        "sasl.mechanism.controller.protocol=PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.controller.plain.sasl.jaas.config={plain}",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=false",
        f"super.users=User:{ADMIN};User:{CONTROLLER}",
        "",
    ])


def format_arguments() -> list[str]:
    """``StorageTool format`` arguments that write the SCRAM credentials of every principal."""
    if not KAFKA_AUTH:
        return []
    return [arg for principal in (ADMIN, *SERVICES, OPERATOR) for arg in (
        "--add-scram", f"{MECHANISM}=[name={principal},password={password(principal)}]")]


def formatted(data: Path) -> None:
    """Notes that ``data`` was formatted with the credentials ``format_arguments`` gave."""
    if KAFKA_AUTH:
        (data / USERS_MARKER).write_text(" ".join((ADMIN, *SERVICES, OPERATOR)) + "\n")


def check_formatted_with_users(data: Path) -> None:
    if KAFKA_AUTH and not (data / USERS_MARKER).exists():
        raise SystemExit(
            f"[stack] Kafka's data in {data} was formatted without SASL users (by a stack "
            "started with SAGA_KAFKA_AUTH=0 or older than Kafka authentication), and the "
            "broker needs them: stop the stack (make down) and remove that directory (the "
            "stack creates it again, with the topics; their records are lost), or start with "
            "SAGA_KAFKA_AUTH=0")


def apply_acls(acl_tool: list[str]) -> None:
    """Makes the broker's ACLs exactly ``acls()`` (ACLs of an older stack are removed) and gives
    the operator principal its SCRAM credentials (Kafka's data formatted before that principal
    existed has none), as the admin, with Kafka's own Admin client (aiokafka speaks no
    CreateAcls version Kafka 4 keeps). ``acl_tool`` is the java command that runs ``ACL_TOOL``
    with Kafka's jars on the class path."""
    if not KAFKA_AUTH:
        return
    settings = admin_client_settings()
    assert settings.kafka_sasl_password is not None
    config = KAFKA_DIR / "admin-client.properties"
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("\n".join([
            f"bootstrap.servers={settings.kafka_bootstrap_servers}",
            "security.protocol=SASL_PLAINTEXT", f"sasl.mechanism={MECHANISM}",
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN}" password="{settings.kafka_sasl_password.get_secret_value()}";',
            ""]))
    os.chmod(config, 0o600)
    done = subprocess.run([*acl_tool, str(config)],
                          input="".join(acl.line() + "\n" for acl in acls())
                          + f"SCRAM {OPERATOR} {password(OPERATOR)}\n", text=True,
                          capture_output=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"[stack] could not set Kafka's ACLs:\n{done.stderr[-2000:]}")

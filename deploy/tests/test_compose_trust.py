"""docker-compose.yml carries the local stack's trust boundary: Kafka authenticates every client
with SASL/SCRAM (a principal per service, the controller on SASL/PLAIN) and authorizes it with
the local stack's ACLs (local_stack.kafka_auth), the services believe the tokens of the
identity provider container and no other, that provider's two halves are each on a network of
their own (the keys where the services are, the token endpoint where only the console and the
host's loopback are), and Prometheus scrapes each part's metrics-only port, unpublished, with no
token. Checked statically here; tools/compose-stack/tests/test_compose_run.py tries the same
reachability from inside the running containers."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from compose_stack import compose_file, dotenv
from local_stack import kafka_auth
from local_stack.settings import DEFAULT_SERVICE_PORTS, METRICS_PORT_OFFSET

ROOT = Path(__file__).resolve().parents[2]
KAFKA_DIR = ROOT / "deploy/docker/kafka"
SERVICES = tuple(DEFAULT_SERVICE_PORTS)
PROMETHEUS_CONFIG = ROOT / "deploy/prometheus/prometheus.docker.yml"
# Where docker-compose.yml mounts deploy/docker/kafka in the Kafka containers.
MOUNTED = "/etc/saga-kafka"


def services() -> dict[str, Any]:
    return dict(compose_file.load()["services"])


def properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines()
                if line and not line.startswith("#"))


def broker_properties() -> dict[str, str]:
    return properties((KAFKA_DIR / "server.properties").read_text())


def script(name: str) -> str:
    return (KAFKA_DIR / name).read_text()


def required_variable(value: str) -> str:
    """NAME of a ``${NAME:?message}`` value, which compose refuses to start without."""
    found = re.fullmatch(r"\$\{(\w+):\?[^}]+\}", value)
    assert found, f"{value} is not taken from .env with a guard"
    return found.group(1)


def acl_lines(init_script: str) -> list[str]:
    """The ACLs kafka-init adds: the lines of the script's ``ACLS`` here-document."""
    found = re.search(r"<<'ACLS'\n(.*?)\nACLS\n", init_script, re.S)
    assert found, "no ACLS here-document in init.sh"
    return found.group(1).splitlines()


def test_every_listener_authenticates_and_nothing_is_allowed_without_an_acl() -> None:
    broker = broker_properties()
    protocols = dict(item.split(":") for item in broker["listener.security.protocol.map"].split(","))
    listeners = {item.split("://")[0] for item in broker["listeners"].split(",")}
    assert set(protocols) == listeners
    assert set(protocols.values()) == {"SASL_PLAINTEXT"}, protocols
    assert broker["sasl.enabled.mechanisms"] == kafka_auth.MECHANISM
    assert broker["sasl.mechanism.inter.broker.protocol"] == kafka_auth.MECHANISM
    # The controller listener on SASL/PLAIN (kafka_auth's docstring says why), as the stack's.
    assert broker["controller.listener.names"] == "CONTROLLER"
    assert broker["sasl.mechanism.controller.protocol"] == "PLAIN"
    assert broker["listener.name.controller.sasl.enabled.mechanisms"] == "PLAIN"
    assert broker["authorizer.class.name"] == (
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    assert broker["allow.everyone.if.no.acl.found"] == "false"
    assert broker["super.users"] == f"User:{kafka_auth.ADMIN};User:{kafka_auth.CONTROLLER}"
    assert broker["auto.create.topics.enable"] == "false"


def test_start_sh_gives_every_sasl_listener_its_login_and_the_broker_the_admin() -> None:
    """Kafka refuses to start a SASL listener without a JAAS entry: start.sh writes one per
    listener of server.properties, SCRAM as the admin on the client ones, PLAIN on the
    controller's."""
    start = script("start.sh")
    listeners = {item.split("://")[0].lower()
                 for item in broker_properties()["listeners"].split(",")}
    jaas = dict(re.findall(r'echo "listener\.name\.(\w+)\.([\w-]+)\.sasl\.jaas\.config=', start))
    assert set(jaas) == listeners
    assert jaas.pop("controller") == "plain"
    assert set(jaas.values()) == {kafka_auth.MECHANISM.lower()}
    assert re.search(r'^scram=".*ScramLoginModule required username=\\"admin\\" '
                     r'password=\\"\$admin\\";"$', start, re.M)
    assert re.search(r'^plain=".*PlainLoginModule required username=\\"controller\\"', start, re.M)


def test_the_storage_is_formatted_with_a_scram_user_for_the_admin_and_each_service() -> None:
    start = script("start.sh")
    commands = [line for line in start.splitlines() if line and not line.startswith("#")]
    assert start.startswith("#!/bin/bash\n") and commands[0] == "set -eu"
    principals = re.search(r'^PRINCIPALS="([^"]+)"$', start, re.M)
    assert principals and principals.group(1).split() == [kafka_auth.ADMIN, *kafka_auth.SERVICES]
    assert f'--add-scram "{kafka_auth.MECHANISM}=[name=$principal,' in start
    assert "kafka-storage.sh format --cluster-id" in start
    assert start.rstrip().endswith(
        'exec /opt/kafka/bin/kafka-server-start.sh "$RUNTIME/server.properties"')
    kafka = services()["kafka"]
    assert kafka["entrypoint"] == ["/bin/bash", f"{MOUNTED}/start.sh"]
    assert f"./deploy/docker/kafka:{MOUNTED}:ro" in kafka["volumes"]
    assert f'CONF={MOUNTED}/server.properties' in start
    # Each principal's password, and the controller's, from .env and nowhere else.
    env = kafka["environment"]
    expected = {f"KAFKA_{p.upper()}_PASSWORD" for p in (*principals.group(1).split(),
                                                         kafka_auth.CONTROLLER)}
    assert {k for k in env if k not in ("CLUSTER_ID", "KAFKA_HOST_PORT")} == expected
    assert all(required_variable(env[k]) == k for k in expected)


def test_the_acls_kafka_init_adds_are_the_local_stacks() -> None:
    lines = acl_lines(script("init.sh"))
    assert len(lines) == len(set(lines))
    assert lines == [acl.line() for acl in kafka_auth.acls()], (
        "deploy/docker/kafka/init.sh's ACLS differ from local_stack.kafka_auth.acls(); print "
        "them with: uv run python -c 'from local_stack import kafka_auth; "
        "print(*(a.line() for a in kafka_auth.acls()), sep=chr(10))'")


def test_the_acl_comparison_sees_an_acl_too_many() -> None:
    init = script("init.sh").replace("\nACLS\n", "\nUser:pagos TOPIC LITERAL order-events WRITE\nACLS\n")
    assert acl_lines(init) != [acl.line() for acl in kafka_auth.acls()]


def test_kafka_init_applies_each_line_as_the_admin() -> None:
    init = script("init.sh")
    commands = [line for line in init.splitlines() if line and not line.startswith("#")]
    assert init.startswith("#!/bin/bash\n") and commands[0] == "set -eu"
    assert "while read -r principal resource_type pattern_type name operation; do" in init
    assert ('--add --allow-principal "$principal" --operation "$operation"' in init
            and '"$resource" "$name" --resource-pattern-type "$pattern_type"' in init)
    assert 'username="admin" password="$KAFKA_ADMIN_PASSWORD"' in init
    kafka_init = services()["kafka-init"]
    assert required_variable(kafka_init["environment"]["KAFKA_ADMIN_PASSWORD"]) == (
        "KAFKA_ADMIN_PASSWORD")
    # And the operator principal's password, which it sets (replays of dead letters).
    assert required_variable(kafka_init["environment"]["KAFKA_OPERATOR_PASSWORD"]) == (
        "KAFKA_OPERATOR_PASSWORD")
    assert set(kafka_init["environment"]) == {"KAFKA_ADMIN_PASSWORD", "KAFKA_OPERATOR_PASSWORD"}
    assert "--entity-type users --entity-name operator" in init


def _kafka_tool_calls(text: str) -> list[str]:
    """Each call of one of Kafka's tools, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return re.findall(r"/opt/kafka/bin/kafka-[\w-]+\.sh[^\n;|>]*", joined)


def test_every_client_of_kafka_in_compose_authenticates() -> None:
    """kafka-init's tools and the broker's healthcheck log in as the admin; a healthcheck
    without credentials would be refused by the broker and never be healthy."""
    calls = _kafka_tool_calls(script("init.sh"))
    assert len(calls) >= 2
    assert all('--command-config "$CLIENT"' in call for call in calls), calls
    check = " ".join(services()["kafka"]["healthcheck"]["test"])
    health_calls = _kafka_tool_calls(check)
    assert health_calls and all("--command-config" in call for call in health_calls)
    config = re.search(r"--command-config (\S+)", check).group(1)  # type: ignore[union-attr]
    start = script("start.sh")
    runtime = re.search(r"^RUNTIME=(\S+)$", start, re.M).group(1)  # type: ignore[union-attr]
    assert config == f"{runtime}/admin-client.properties"
    assert 'cat > "$RUNTIME/admin-client.properties"' in start
    assert "security.protocol=SASL_PLAINTEXT" in start
    assert f"sasl.mechanism={kafka_auth.MECHANISM}" in start


def test_the_client_check_sees_a_tool_called_without_credentials() -> None:
    calls = _kafka_tool_calls("/opt/kafka/bin/kafka-topics.sh --bootstrap-server kafka:9092 \\\n"
                              "  --list\n")
    assert calls and not all("--command-config" in call for call in calls)


def test_each_worker_logs_in_to_kafka_as_its_own_principal_and_the_apis_not_at_all() -> None:
    all_services = services()
    kafka_env = all_services["kafka"]["environment"]
    for service in SERVICES:
        env = all_services[f"{service}-worker"]["environment"]
        assert env["KAFKA_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT"
        assert env["KAFKA_SASL_MECHANISM"] == kafka_auth.MECHANISM
        assert env["KAFKA_SASL_USERNAME"] == service
        # The very variable its SCRAM user was made with.
        variable = required_variable(env["KAFKA_SASL_PASSWORD"])
        assert variable == f"KAFKA_{service.upper()}_PASSWORD"
        assert required_variable(kafka_env[variable]) == variable
        # The API writes the outbox and never talks to Kafka: no credentials for it.
        assert not any(k.startswith("KAFKA_") for k in all_services[service]["environment"])


def test_every_part_of_a_service_trusts_the_identity_provider_container() -> None:
    all_services = services()
    provider = all_services["identity-provider"]
    env = provider["environment"]
    issuer = env["IDENTITY_ISSUER"]
    # The provider's own name on the compose network and its port: what the services reach.
    assert issuer == f"http://identity-provider:{env['IDENTITY_PORT']}"
    for service in SERVICES:
        for part in (service, f"{service}-worker"):
            spec = all_services[part]
            # Required, from .env: no default issuer in the file.
            assert spec["environment"]["AUTH_ISSUER"].startswith("${AUTH_ISSUER:?"), part
            assert spec["environment"]["AUTH_AUDIENCE"] == env["IDENTITY_AUDIENCE"], part
            # Required: compose refuses to start without the operator's public keys.
            assert spec["environment"]["SAGA_OPERATOR_PUBLIC_KEYS"].startswith(
                "${SAGA_OPERATOR_PUBLIC_KEYS:?"), part
            assert spec["depends_on"]["identity-provider"] == {"condition": "service_healthy"}


def test_the_issuer_has_no_default_but_the_example_env_names_the_provider() -> None:
    """compose stops when AUTH_ISSUER is unset; the .env compose_stack writes names the
    identity-provider container, whose tokens' `iss` it is."""
    assert compose_file.defaults().get("AUTH_ISSUER") is None
    assert dotenv.values()["AUTH_ISSUER"] == services()["identity-provider"]["environment"][
        "IDENTITY_ISSUER"]
    assert services()["consola"]["environment"]["AUTH_ISSUER"].startswith("${AUTH_ISSUER:?")


PROVIDER, SIGNIN = "identity-provider", "identity-signin"


def test_the_token_endpoint_is_reachable_from_the_host_loopback_only() -> None:
    """identity-signin hands a token to whoever asks: its port is published on the host's
    loopback alone; the public half, which the services reach, publishes none."""
    all_services = services()
    signin, provider = all_services[SIGNIN], all_services[PROVIDER]
    assert signin["ports"] == ["127.0.0.1:8020:8020"]
    assert "ports" not in provider
    for half in (signin, provider):
        assert half["environment"]["IDENTITY_HOST"] == "0.0.0.0"
        assert half["build"] == provider["build"]
        assert half["build"]["args"]["SERVICE"] == "identity-provider"
        assert "/health" in " ".join(half["healthcheck"]["test"])


def test_the_two_halves_are_one_issuer_with_one_key() -> None:
    """Same issuer, audience and key file in the same volume: a token identity-signin signs is
    one the services check against the public half's keys. Only the public half is
    public-only, and its discovery document sends token requests to identity-signin."""
    provider = services()[PROVIDER]["environment"]
    signin = services()[SIGNIN]["environment"]
    for name in ("IDENTITY_ISSUER", "IDENTITY_AUDIENCE", "IDENTITY_SIGNING_KEY_FILE",
                 "IDENTITY_PORT", "IDENTITY_SIGNIN_URL"):
        assert provider[name] == signin[name], name
    assert provider["IDENTITY_PUBLIC_ONLY"] == "true"
    assert "IDENTITY_PUBLIC_ONLY" not in signin
    assert provider["IDENTITY_SIGNIN_URL"] == f"http://{SIGNIN}:{signin['IDENTITY_PORT']}"
    assert services()[PROVIDER]["volumes"] == ["identitydata:/data"]
    assert services()[SIGNIN]["volumes"] == ["identitydata:/data:ro"]


def test_the_signing_key_is_made_in_the_providers_volume_before_it_starts() -> None:
    provider = services()[PROVIDER]
    key = provider["environment"]["IDENTITY_SIGNING_KEY_FILE"]
    volume, _, mount = provider["volumes"][0].partition(":")
    assert key.startswith(mount + "/") and volume == "identitydata"
    command = " ".join(provider["command"])
    make, _, start = command.partition(" && exec ")
    assert make.endswith(f"python -m identity_provider.signing_key_file {key}")
    assert start.endswith("python -m identity_provider")
    # identity-signin reads the key the public half made: it starts once that one is healthy.
    assert services()[SIGNIN]["depends_on"][PROVIDER] == {"condition": "service_healthy"}
    # The image makes /data its user's, so that the volume is writable by the provider.
    assert "install -d -o 10001 -g 10001" in (ROOT / "deploy/docker/service.Dockerfile").read_text()


def networks_of(spec: dict[str, Any]) -> set[str]:
    """The networks a service of the compose file is on (none named: `default`)."""
    named = spec.get("networks", ["default"])
    return set(named)  # a list, or a mapping of names to settings


def identity_reach_problems(document: dict[str, Any]) -> list[str]:
    """Who shares a network with each half of the identity provider, against who must: the
    public half with every API and worker and the console (they fetch its keys), and nothing
    else; identity-signin with the console alone (it trades its sign-ins' codes)."""
    all_services = document["services"]
    declared = set(document.get("networks") or {})
    problems = []
    # podman-compose puts a service without `networks:` on podman's own bridge network when the
    # file declares several and `default` is not among them: declared, it is docker's default.
    if "default" not in declared:
        problems.append("the network `default` is not declared")
    must = {PROVIDER: {*(p for s in SERVICES for p in (s, f"{s}-worker")), "consola"},
            SIGNIN: {"consola"}}
    for half, expected in must.items():
        own = networks_of(all_services[half])
        if "default" in own:
            problems.append(f"{half} is on the network default")
        reach = {name for name, spec in all_services.items()
                 if name != half and networks_of(spec) & own}
        if reach - expected:
            problems.append(f"{half} is reached by {sorted(reach - expected)}")
        if expected - reach:
            problems.append(f"{half} is not reached by {sorted(expected - reach)}")
    return problems


def test_only_what_must_reach_each_half_of_the_identity_provider_can() -> None:
    assert identity_reach_problems(compose_file.load()) == []
    # Each on a network of its own, which it shares with no other half.
    all_services = services()
    assert networks_of(all_services[PROVIDER]) == {"identity"}
    assert networks_of(all_services[SIGNIN]) == {"identity-signin"}


def test_the_reach_check_sees_a_network_too_many_or_missing() -> None:
    document = compose_file.load()
    document["services"]["gateway"]["networks"] = ["default", "identity"]
    document["services"]["pedidos-worker"]["networks"] = ["default", "identity-signin"]
    assert identity_reach_problems(document) == [
        "identity-provider is reached by ['gateway']",
        "identity-provider is not reached by ['pedidos-worker']",
        "identity-signin is reached by ['pedidos-worker']"]
    document = compose_file.load()
    document["services"][SIGNIN]["networks"] = ["default", "identity-signin"]
    del document["networks"]["default"]
    problems = identity_reach_problems(document)
    assert problems[:2] == ["the network `default` is not declared",
                            "identity-signin is on the network default"]


def test_prometheus_scrapes_every_part_on_its_metrics_port_with_no_token() -> None:
    """Nothing to expire: no scrape carries a token, every target is a part's metrics-only
    port (METRICS_PORT on all its interfaces of the project's network), and no host address
    publishes that port."""
    all_services = services()
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    jobs = config["scrape_configs"]
    assert not [job["job_name"] for job in jobs
                if {"authorization", "bearer_token", "bearer_token_file"} & set(job)]
    scraped = {target for job in jobs for group in job.get("static_configs", [])
               for target in group["targets"]}
    scraped |= {f"{name}:{sd['port']}" for job in jobs for sd in job.get("dns_sd_configs", [])
                for name in sd["names"]}
    expected = set()
    for service in SERVICES:
        for part in (service, f"{service}-worker"):
            env = all_services[part]["environment"]
            assert env["METRICS_HOST"] == "0.0.0.0"
            port = env["METRICS_PORT"]
            assert int(port) == DEFAULT_SERVICE_PORTS[service] + METRICS_PORT_OFFSET
            expected.add(f"{part}:{port}")
            published = [p.rsplit(":", 1)[-1] for p in all_services[part].get("ports", [])]
            assert port not in published, f"{part} publishes its metrics port"
    assert scraped == expected
    assert "prometheus-token" not in all_services


@pytest.mark.external
def test_promtool_takes_the_compose_prometheus_configuration(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: deploy/local/bootstrap.sh installs Debian's prometheus"
    shutil.copy(PROMETHEUS_CONFIG, tmp_path / "prometheus.yml")
    shutil.copy(PROMETHEUS_CONFIG.parent / "alerts.yml", tmp_path / "alerts.yml")
    done = subprocess.run([promtool, "check", "config", "--syntax-only",
                           str(tmp_path / "prometheus.yml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr

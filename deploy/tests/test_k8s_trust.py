"""The Kubernetes manifests carry the trust boundary: every service believes the tokens of one
issuer, a setting (saga-auth-settings' AUTH_ISSUER) that every container requires and the base
does not give (the installer's overlay does; only the kind overlay's is the local identity
provider); pagos presents the gateway's secret key from a Secret; Prometheus scrapes a
metrics-only port with no token; the smoke Job calls with tokens. Each check is shown to catch a manifest
that breaks it."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from local_stack import identity
from local_stack.settings import DEFAULT_SERVICE_PORTS
from saga_harness import scripts

generate = scripts.load("deploy/k8s/generate.py", "k8s_generate")
SERVICES = tuple(DEFAULT_SERVICE_PORTS)
PROVIDER = "identity-provider"
# The same provider with its sign-in form and token endpoint, which the services cannot reach.
SIGNIN = "identity-signin"


def _of(objects: list[dict[str, Any]], kind: str, name: str | None = None
        ) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind
            and (name is None or o["metadata"]["name"] == name)]


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = _of(objects, kind, name)
    assert len(found) == 1, f"{kind} {name}: {len(found)} of them"
    return found[0]


def _containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    return list(workload["spec"]["template"]["spec"]["containers"])


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def _service_deployments(objects: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for o in _of(objects, "Deployment"):
        if o["metadata"]["labels"].get("app.kubernetes.io/name") in SERVICES:
            yield o


def _reaches(policy: dict[str, Any], name: str, port: int) -> bool:
    return any({"protocol": "TCP", "port": port} in rule.get("ports", [])
               and any(peer.get("podSelector", {}).get("matchLabels", {}).get(
                   "app.kubernetes.io/name") == name for peer in rule.get("to", []))
               for rule in policy["spec"].get("egress", []))


def _reaches_https(policy: dict[str, Any]) -> bool:
    return any({"protocol": "TCP", "port": 443} in rule.get("ports", [])
               and any("ipBlock" in peer for peer in rule.get("to", []))
               for rule in policy["spec"].get("egress", []))


def _requires_the_issuer(container: dict[str, Any]) -> bool:
    ref = _env(container).get("AUTH_ISSUER", {}).get("valueFrom", {}).get("configMapKeyRef", {})
    return ref == {"name": generate.AUTH_SETTINGS, "key": "AUTH_ISSUER", "optional": False}


def auth_problems(objects: list[dict[str, Any]]) -> list[str]:
    """Every part of every service takes AUTH_* from saga-auth-settings and nowhere else (its
    AUTH_ISSUER required: no pod starts without one), and can reach the issuer those settings
    name."""
    out: list[str] = []
    settings = _one(objects, "ConfigMap", generate.AUTH_SETTINGS)["data"]
    if settings.get("AUTH_AUDIENCE") != identity.AUDIENCE:
        out.append(f"AUTH_AUDIENCE is {settings.get('AUTH_AUDIENCE')!r}")
    local = settings.get("AUTH_ISSUER") == f"http://{PROVIDER}:8020"
    for deployment in _service_deployments(objects):
        name = deployment["metadata"]["name"]
        for container in _containers(deployment):
            sources = [s["configMapRef"]["name"] for s in container.get("envFrom", [])
                       if "configMapRef" in s]
            if generate.AUTH_SETTINGS not in sources:
                out.append(f"{name}: no envFrom {generate.AUTH_SETTINGS}")
            if not _requires_the_issuer(container):
                out.append(f"{name}: does not require AUTH_ISSUER from {generate.AUTH_SETTINGS}")
            if any(k.startswith("AUTH_") and k != "AUTH_ISSUER" for k in _env(container)) or (
                    "value" in _env(container).get("AUTH_ISSUER", {})):
                out.append(f"{name}: an AUTH_* of its own")
        policy = _one(objects, "NetworkPolicy", name)
        if local and not _reaches(policy, PROVIDER, 8020):
            out.append(f"{name}: its NetworkPolicy does not reach the identity provider")
        if not local and not _reaches_https(policy):
            out.append(f"{name}: its NetworkPolicy does not reach an issuer over HTTPS")
    if local:
        provider = _one(objects, "Deployment", PROVIDER)
        env = {k: e.get("value") for k, e in _env(_containers(provider)[0]).items()}
        if env.get("IDENTITY_ISSUER") != settings["AUTH_ISSUER"]:
            out.append(f"the provider's issuer {env.get('IDENTITY_ISSUER')} is not AUTH_ISSUER")
        if env.get("IDENTITY_AUDIENCE") != settings["AUTH_AUDIENCE"]:
            out.append("the provider's audience is not AUTH_AUDIENCE")
        port = _one(objects, "Service", PROVIDER)["spec"]["ports"][0]["port"]
        if f"http://{PROVIDER}:{port}" != settings["AUTH_ISSUER"]:
            out.append("AUTH_ISSUER is not the provider's Service")
    return out


def _secrets_of(workload: dict[str, Any]) -> set[str]:
    """The Secrets a workload's pods can read: as variables or as mounted files."""
    spec = workload["spec"]["template"]["spec"]
    names = {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
    for container in spec["containers"]:
        names |= {e["valueFrom"]["secretKeyRef"]["name"] for e in container.get("env", [])
                  if "secretKeyRef" in e.get("valueFrom", {})}
    return names


def secret_reference_problems(objects: list[dict[str, Any]]) -> list[str]:
    """pagos' gateway key comes from a Secret, and Prometheus scrapes with no token (the
    metrics-only port); only pagos' worker,
    which runs the gateway worker, can read the gateway's key and the payment token's opening
    keys: pagos' API, internet-facing, serves GET /payments and needs neither."""
    out: list[str] = []
    name, key = generate.GATEWAY_SECRET
    _, open_keys, _ = generate.TOKEN_KEYS["pagos"]
    for deployment in _service_deployments(objects):
        workload = deployment["metadata"]["name"]
        env = _env(_containers(deployment)[0])
        given = env.get("PAGOS_GATEWAY_SECRET_KEY", {}).get("valueFrom", {}).get("secretKeyRef")
        if workload == "pagos-worker" and given != {"name": name, "key": key}:
            out.append(f"{workload}: PAGOS_GATEWAY_SECRET_KEY is {given}")
        if workload == "pagos-worker" and open_keys not in _secrets_of(deployment):
            out.append(f"{workload}: does not mount the opening keys")
        if workload != "pagos-worker" and {name, open_keys} & _secrets_of(deployment):
            out.append(f"{workload}: can read the gateway's key or the opening keys")
        if workload != "pagos-worker" and any(v.startswith(("PAGOS_GATEWAY_SECRET_KEY",
                                                            "PAGOS_PAYMENT_TOKEN_OPEN_KEYS"))
                                              for v in env):
            out.append(f"{workload}: has the gateway's key or the opening keys")
    for gateway in _of(objects, "Deployment", "fake-gateway"):
        given = _env(_containers(gateway)[0]).get("GATEWAY_SECRET_KEY", {}).get(
            "valueFrom", {}).get("secretKeyRef")
        if given != {"name": name, "key": key}:
            out.append(f"fake-gateway: GATEWAY_SECRET_KEY is {given}, not pagos' Secret")
    for monitor in _of(objects, "ServiceMonitor"):
        for endpoint in monitor["spec"]["endpoints"]:
            if {"authorization", "bearerTokenSecret", "bearerTokenFile"} & set(endpoint) \
                    or endpoint.get("port") != generate.METRICS_PORT_NAME:
                out.append(f"ServiceMonitor {monitor['metadata']['name']}: does not scrape "
                           "the metrics port without a token")
    return out


def smoke_problems(objects: list[dict[str, Any]], local: bool) -> list[str]:
    out: list[str] = []
    job = _one(objects, "Job", "saga-smoke")
    command = _containers(job)[0]["command"]
    if local:
        if command[-2:] != ["--identity-provider", f"http://{SIGNIN}:8020"]:
            out.append(f"the smoke Job does not ask the identity provider: {command}")
        if not _reaches(_one(objects, "NetworkPolicy", "saga-smoke"), SIGNIN, 8020):
            out.append("the smoke Job's NetworkPolicy does not reach the identity provider")
    elif command[-2:] != ["--tokens", "/smoke-tokens"]:
        out.append(f"the smoke Job takes no tokens from saga-smoke-tokens: {command}")
    return out


@pytest.mark.external
def test_the_default_overlay_trusts_an_external_issuer(
        default_overlay: list[dict[str, Any]]) -> None:
    assert auth_problems(default_overlay) == []
    # No default issuer: the installer's overlay adds it (docs/deploy.md), and until then no
    # pod starts.
    assert "AUTH_ISSUER" not in _one(default_overlay, "ConfigMap", generate.AUTH_SETTINGS)["data"]
    assert not _of(default_overlay, "Deployment", PROVIDER)
    assert secret_reference_problems(default_overlay) == []


@pytest.mark.external
def test_the_kind_overlay_trusts_the_local_identity_provider_and_its_smoke_job_uses_it(
        every_overlay: dict[str, list[dict[str, Any]]]) -> None:
    kind = every_overlay["kind"]
    assert _one(kind, "ConfigMap", generate.AUTH_SETTINGS)["data"]["AUTH_ISSUER"] == (
        f"http://{PROVIDER}:8020")
    assert auth_problems(kind) == []
    assert secret_reference_problems(kind) == []
    assert smoke_problems(kind, local=True) == []
    assert identity_problems(kind) == []


def _admitted(objects: list[dict[str, Any]], policy: dict[str, Any]) -> set[str]:
    """The workloads whose pods a NetworkPolicy's ingress admits (podSelectors of this
    namespace, by matchLabels and `In` expressions)."""
    def admits(peer: dict[str, Any], labels: dict[str, str]) -> bool:
        selector = peer.get("podSelector")
        if selector is None or "namespaceSelector" in peer:
            return False
        return (selector.get("matchLabels", {}).items() <= labels.items() and all(
            labels.get(e["key"]) in e["values"] for e in selector.get("matchExpressions", [])
            if e["operator"] == "In"))
    return {o["metadata"]["name"] for o in objects if o["kind"] in ("Deployment", "Job")
            and any(admits(peer, o["spec"]["template"]["metadata"]["labels"])
                    for rule in policy["spec"].get("ingress", []) for peer in rule.get("from", []))}


def identity_problems(objects: list[dict[str, Any]]) -> list[str]:
    """The issuer the services reach publishes its keys only; the instance that hands out tokens
    (the same key and issuer) is reached by the console and the smoke Job alone."""
    out: list[str] = []
    public = _env(_containers(_one(objects, "Deployment", PROVIDER))[0])
    signin = _env(_containers(_one(objects, "Deployment", SIGNIN))[0])
    if public.get("IDENTITY_PUBLIC_ONLY", {}).get("value") != "true":
        out.append(f"{PROVIDER}: hands out tokens (IDENTITY_PUBLIC_ONLY is not true)")
    if "IDENTITY_PUBLIC_ONLY" in signin:
        out.append(f"{SIGNIN}: public-only")
    for name in ("IDENTITY_ISSUER", "IDENTITY_SIGNING_KEY_FILE", "IDENTITY_AUDIENCE"):
        if public.get(name) != signin.get(name):
            out.append(f"{PROVIDER} and {SIGNIN} differ in {name}")
    if public.get("IDENTITY_SIGNIN_URL", {}).get("value") != f"http://{SIGNIN}:8020":
        out.append(f"{PROVIDER}'s discovery document does not name {SIGNIN}")
    services = {f"{s}-{c}" for s in SERVICES for c in ("api", "worker")}
    reach_public = _admitted(objects, _one(objects, "NetworkPolicy", PROVIDER))
    if reach_public != services | {"consola"}:
        out.append(f"{PROVIDER} admits {sorted(reach_public)}")
    reach_signin = _admitted(objects, _one(objects, "NetworkPolicy", SIGNIN))
    if reach_signin != {"consola", "saga-smoke"}:
        out.append(f"{SIGNIN} admits {sorted(reach_signin)}, not the console and the smoke Job")
    if not _reaches(_one(objects, "NetworkPolicy", "consola"), SIGNIN, 8020):
        out.append(f"the console's NetworkPolicy does not reach {SIGNIN}")
    return out


@pytest.mark.external
def test_the_identity_rules_catch_a_token_endpoint_the_services_reach(
        every_overlay: dict[str, list[dict[str, Any]]]) -> None:
    kind = copy.deepcopy(every_overlay["kind"])
    public = _containers(_one(kind, "Deployment", PROVIDER))[0]
    public["env"] = [e for e in public["env"] if e["name"] != "IDENTITY_PUBLIC_ONLY"]
    rule = _one(kind, "NetworkPolicy", SIGNIN)["spec"]["ingress"][0]["from"][0]
    rule["podSelector"]["matchExpressions"][0]["values"].append("worker")
    problems = identity_problems(kind)
    assert any("hands out tokens" in p for p in problems), problems
    assert any(f"{SIGNIN} admits" in p and "pedidos-worker" in p for p in problems), problems
    key = _containers(_one(kind, "Deployment", PROVIDER))[0]
    volume = _one(kind, "Deployment", PROVIDER)["spec"]["template"]["spec"]["volumes"][0]
    assert volume["secret"]["secretName"] == "identity-provider-signing-key"
    assert _env(key)["IDENTITY_SIGNING_KEY_FILE"]["value"].startswith(
        key["volumeMounts"][0]["mountPath"] + "/")


def _generated() -> list[dict[str, Any]]:
    return copy.deepcopy([generate.auth_settings(),
                          *(o for s, p in DEFAULT_SERVICE_PORTS.items()
                            for o in (*generate.service_objects(s, p),
                                      generate.service_monitor(s)))])


def test_the_generated_objects_keep_the_trust_rules() -> None:
    assert auth_problems(_generated()) == []
    assert secret_reference_problems(_generated()) == []


def test_the_base_names_no_issuer_and_the_console_requires_one() -> None:
    assert "AUTH_ISSUER" not in generate.auth_settings()["data"]
    console = _one(generate.console_objects(), "Deployment", generate.CONSOLE)
    assert _requires_the_issuer(_containers(console)[0])


def _deployment(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return _one(objects, "Deployment", name)


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda o: _containers(_deployment(o, "pedidos-api"))[0]["envFrom"].pop(),
     "pedidos-api: no envFrom"),
    (lambda o: _containers(_deployment(o, "pagos-worker"))[0]["env"].pop(
        [e["name"] for e in _containers(_deployment(o, "pagos-worker"))[0]["env"]].index(
            "AUTH_ISSUER")), "pagos-worker: does not require AUTH_ISSUER"),
    (lambda o: _containers(_deployment(o, "inventario-worker"))[0]["env"].append(
        {"name": "AUTH_ISSUER", "value": "https://elsewhere.example.com"}), "AUTH_* of its own"),
    (lambda o: _one(o, "NetworkPolicy", "pagos-api")["spec"].update(egress=[
        rule for rule in _one(o, "NetworkPolicy", "pagos-api")["spec"]["egress"]
        if not any("ipBlock" in peer for peer in rule.get("to", []))]),
     "pagos-api: its NetworkPolicy does not reach an issuer"),
    (lambda o: _one(o, "ConfigMap", generate.AUTH_SETTINGS)["data"].update(
        AUTH_AUDIENCE="other"), "AUTH_AUDIENCE"),
])
def test_each_auth_rule_catches_a_manifest_that_breaks_it(mutate: Any, expected: str) -> None:
    objects = _generated()
    mutate(objects)
    problems = auth_problems(objects)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda o: _containers(_deployment(o, "pagos-worker"))[0].update(env=[
        e for e in _containers(_deployment(o, "pagos-worker"))[0]["env"]
        if e["name"] != "PAGOS_GATEWAY_SECRET_KEY"]), "pagos-worker: PAGOS_GATEWAY_SECRET_KEY"),
    (lambda o: _deployment(o, "pagos-worker")["spec"]["template"]["spec"].update(volumes=[]),
     "pagos-worker: does not mount the opening keys"),
    (lambda o: _containers(_deployment(o, "pedidos-worker"))[0]["env"].append(
        _env(_containers(_deployment(o, "pagos-worker"))[0])["PAGOS_GATEWAY_SECRET_KEY"]),
     "pedidos-worker: can read the gateway's key"),
    (lambda o: _containers(_deployment(o, "pagos-api"))[0]["env"].append(
        _env(_containers(_deployment(o, "pagos-worker"))[0])["PAGOS_GATEWAY_SECRET_KEY"]),
     "pagos-api: can read the gateway's key"),
    (lambda o: _deployment(o, "pagos-api")["spec"]["template"]["spec"]["volumes"].append(
        _deployment(o, "pagos-worker")["spec"]["template"]["spec"]["volumes"][-1]),
     "pagos-api: can read the gateway's key or the opening keys"),
    (lambda o: _containers(_deployment(o, "pagos-api"))[0]["env"].append(
        {"name": "PAGOS_PAYMENT_TOKEN_OPEN_KEYS_FILE", "value": "/x"}),
     "pagos-api: has the gateway's key or the opening keys"),
    (lambda o: _one(o, "ServiceMonitor", "inventario")["spec"]["endpoints"][0].update(
        authorization={"type": "Bearer"}), "ServiceMonitor inventario"),
])
def test_each_secret_rule_catches_a_manifest_that_breaks_it(mutate: Any, expected: str) -> None:
    objects = _generated()
    mutate(objects)
    problems = secret_reference_problems(objects)
    assert any(expected in p for p in problems), problems


@pytest.mark.external
def test_the_local_rules_catch_a_kind_overlay_without_its_patches(
        every_overlay: dict[str, list[dict[str, Any]]]) -> None:
    kind = copy.deepcopy(every_overlay["kind"])
    for name in ("pedidos-api", "saga-smoke"):
        _one(kind, "NetworkPolicy", name)["spec"]["egress"].pop()
    _containers(_one(kind, "Deployment", PROVIDER))[0]["env"][2]["value"] = "http://other:8020"
    _containers(_one(kind, "Job", "saga-smoke"))[0]["command"][-2:] = ["--tokens", "/x"]
    problems = auth_problems(kind) + smoke_problems(kind, local=True)
    for expected in ("pedidos-api: its NetworkPolicy does not reach the identity provider",
                     "the provider's issuer", "does not ask the identity provider",
                     "smoke Job's NetworkPolicy"):
        assert any(expected in p for p in problems), (expected, problems)

"""How sagactl acts as the operator: on the services' APIs with an operator's token, on Kafka as
the ``operator`` principal (never the admin), and signing replays with the operator's key.

- Token: SAGACTL_TOKEN; in a checkout beside a local stack, one from its identity provider for
  ``$USER`` with the role ``operator`` (the audit records the token's ``sub`` as who acted).
- Services: SAGACTL_PEDIDOS_URL, SAGACTL_INVENTARIO_URL, SAGACTL_PAGOS_URL (default: the local
  stack's, http://127.0.0.1:<PEDIDOS_PORT...>).
- Kafka: the KAFKA_* variables when they name a protocol or a principal (the operator's); in a
  checkout, the local stack's ``operator`` principal, with the password it generated.
"""

from __future__ import annotations

import getpass
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from sagakit import settings
from sagakit.settings import KafkaClientSettings

OPERATOR_PRINCIPAL = "operator"


class ApiError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


def service_url(service: str) -> str:
    given = {"pedidos": os.environ.get("SAGACTL_PEDIDOS_URL"),
             "inventario": os.environ.get("SAGACTL_INVENTARIO_URL"),
             "pagos": os.environ.get("SAGACTL_PAGOS_URL")}[service]
    if given:
        return given.rstrip("/")
    port = {"pedidos": os.environ.get("PEDIDOS_PORT", "8001"),
            "inventario": os.environ.get("INVENTARIO_PORT", "8002"),
            "pagos": os.environ.get("PAGOS_PORT", "8003")}[service]
    return f"http://127.0.0.1:{port}"


def _checkout_stack() -> Any | None:
    """The local stack's modules when sagactl runs in a checkout beside it."""
    try:
        import local_stack.identity as identity
    except ModuleNotFoundError as missing:
        if missing.name is None or not missing.name.startswith("local_stack"):
            raise
        return None
    return identity


_token: str | None = None


def token() -> str:
    global _token
    if _token is not None:
        return _token
    given = os.environ.get("SAGACTL_TOKEN")
    if given:
        _token = given.strip()
        return _token
    identity = _checkout_stack()
    if identity is None:
        raise SystemExit("sagactl: set SAGACTL_TOKEN (a bearer token with the role operator)")
    try:
        _token = str(identity.new_token(getpass.getuser(), ["operator"]))
    except OSError as exc:
        raise SystemExit(f"sagactl: no token from the local identity provider ({exc}); set "
                         "SAGACTL_TOKEN or start the stack (make up)") from None
    return _token


def call(service: str, method: str, path: str, body: dict[str, Any] | None = None
         ) -> dict[str, Any]:
    """``method`` ``path`` on ``service``'s API as the operator; ``ApiError`` on a refusal."""
    request = urllib.request.Request(
        service_url(service) + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token()}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read()).get("detail", exc.reason)
        except (ValueError, AttributeError):
            detail = exc.reason
        raise ApiError(exc.code, str(detail)) from None


def kafka() -> KafkaClientSettings:
    """The operator principal's Kafka client settings."""
    if os.environ.get("KAFKA_SECURITY_PROTOCOL") or os.environ.get("KAFKA_SASL_USERNAME"):
        return settings.load(KafkaClientSettings)
    try:
        from local_stack import kafka_auth, secrets
    except ModuleNotFoundError as missing:
        if missing.name is None or not missing.name.startswith("local_stack"):
            raise
        return settings.load(KafkaClientSettings)
    if not kafka_auth.KAFKA_AUTH:
        return settings.load(KafkaClientSettings)
    if secrets.existing(f"kafka-{OPERATOR_PRINCIPAL}") is None:
        raise SystemExit("sagactl: the local stack has no operator principal yet (make up)")
    made = kafka_auth.client_settings(OPERATOR_PRINCIPAL)
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    return made.model_copy(update={"kafka_bootstrap_servers": bootstrap}) if bootstrap else made


def signing_key_file(checkout: Path) -> Path:
    """SAGACTL_SIGNING_KEY_FILE; by default the local stack's, in ``checkout``."""
    given = os.environ.get("SAGACTL_SIGNING_KEY_FILE")
    if given:
        return Path(given)
    state = Path(os.environ.get("SAGA_STATE_DIR", checkout / ".local"))
    return state / "secrets" / "operator-signing.key"

"""pagos settings (docs/standard.md#timeouts-of-each-service): gateway timeout 30 s, 3 retries at
2-8-18 s, 5 refund attempts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from saga_contracts.sealing import InvalidKey, OpeningKeys, parse_opening_keys
from sagakit.settings import InvalidConfiguration, value_or_file


def _floats(value: object) -> tuple[float, ...]:
    if isinstance(value, str):
        return tuple(float(v) for v in value.split(",") if v.strip())
    return tuple(value)  # type: ignore[arg-type]


class PagosSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PAGOS_", extra="ignore")

    gateway_url: str = Field("http://127.0.0.1:8010", validation_alias="GATEWAY_URL", description=(
        "Base URL of the payment gateway."))
    gateway_timeout_s: float = Field(30.0, gt=0, le=120, description=(
        "Longest a call to the gateway may take; past it the outcome is unknown and the call is "
        "made again under the same idempotency key. A call holds its payment for this plus "
        "15 s."))
    # How long an idle connection to the gateway is kept for reuse: shorter than the shortest
    # keep-alive common servers use (5 s: uvicorn's and Apache's default), so pagos gives a
    # connection up before the gateway closes it under a charge being sent (the charge would
    # then wait for its retry); aiohttp's own default is 15 s.
    gateway_keep_alive_s: float = Field(4.0, gt=0, description=(
        "How long an idle connection to the gateway is kept for reuse; shorter than the "
        "gateway keeps one."))
    # Comma-separated seconds in the environment: "2,8,18".
    charge_retry_schedule_s: Annotated[tuple[float, ...], NoDecode] = Field(
        (2.0, 8.0, 18.0), description=(
        "Waits before each retry of a charge whose outcome is unknown (timeout, connection "
        "error, 5xx), one retry per entry; then the payment fails and is dead-lettered. Also "
        "the waits between the calls that resolve a cancelled charge."))
    refund_retry_schedule_s: Annotated[tuple[float, ...], NoDecode] = Field(
        (2.0, 4.0, 8.0, 16.0), description=(
        "Waits before each retry of a failed refund, one retry per entry; then FalloReembolso "
        "is emitted and the payment is left for a refund by hand."))
    resolve_attempts: int = Field(5, ge=1, description=(
        "Calls made to learn whether a charge cancelled while its outcome was unknown was made "
        "(the charge replayed under its key), however many calls the charge made before; then "
        "FalloReembolso, for a refund by hand."))
    # The longest the gateway worker sleeps between looks at the table; it also wakes when this
    # instance creates work and when the earliest scheduled work falls due.
    worker_poll_interval_s: float = Field(5.0, gt=0, le=5, description=(
        "Longest the gateway worker sleeps between looks at the payments table."))
    worker_concurrency: int = Field(16, ge=1, le=256, description=(
        "Most gateway calls (charges, refunds) one instance has in flight at once."))

    @field_validator("charge_retry_schedule_s", "refund_retry_schedule_s", mode="before")
    @classmethod
    def _parse(cls, value: object) -> tuple[float, ...]:
        parsed = _floats(value)
        if not parsed or any(v < 0 for v in parsed):
            raise ValueError("a comma-separated list of non-negative seconds")
        return parsed

    @property
    def lease_s(self) -> float:
        """How long a gateway call owns its payment row; past it, another worker may retry."""
        return self.gateway_timeout_s + 15


class GatewaySecretKey(BaseSettings):
    """The payment gateway's secret key, which every call to it carries."""

    model_config = SettingsConfigDict(env_prefix="PAGOS_", extra="ignore")

    gateway_secret_key: SecretStr | None = Field(None, description=(
        "The payment gateway's secret key (`sk_...`), sent as `Authorization: Bearer` on "
        "every call. Required where the gateway worker runs (RUN_JOBS), here or in "
        "PAGOS_GATEWAY_SECRET_KEY_FILE; never read by an API instance; never logged."))
    gateway_secret_key_file: Path | None = Field(None, description=(
        "A file holding PAGOS_GATEWAY_SECRET_KEY, read at start, instead of the variable (the "
        "local stack passes the key it generated this way)."))

    def secret_key(self) -> str:
        """The key, or the process stops with a message naming the variable (never the
        key)."""
        secret = self.gateway_secret_key
        return value_or_file(None if secret is None else secret.get_secret_value(),
                             self.gateway_secret_key_file, "PAGOS_GATEWAY_SECRET_KEY")


class PaymentTokenKeys(BaseSettings):
    """The private keys pagos opens sealed payment tokens with (``saga_contracts.sealing``),
    by key id: the one pedidos seals with now, and during a rotation the one it sealed with
    before."""

    model_config = SettingsConfigDict(env_prefix="PAGOS_", extra="ignore")

    payment_token_open_keys: SecretStr | None = Field(None, description=(
        "The private keys that open sealed payment tokens, each `<key id>:<base64 of the "
        "32-byte X25519 private key>`, separated by commas or new lines; a token sealed with "
        "a key id not listed fails its charge into a dead letter (key rotation: "
        "docs/operations.md). Required where the gateway worker runs (RUN_JOBS), here or in "
        "PAGOS_PAYMENT_TOKEN_OPEN_KEYS_FILE; never read by an API instance; never logged."))
    payment_token_open_keys_file: Path | None = Field(None, description=(
        "A file holding PAGOS_PAYMENT_TOKEN_OPEN_KEYS (one key a line), read at start, instead "
        "of the variable: the way to keep private keys out of the environment (the local "
        "stack passes its generated key this way)."))

    def opening_keys(self) -> OpeningKeys:
        """The keys, or the process stops with a message naming the variable (never a key)."""
        secret = self.payment_token_open_keys
        text = value_or_file(None if secret is None else secret.get_secret_value(),
                             self.payment_token_open_keys_file, "PAGOS_PAYMENT_TOKEN_OPEN_KEYS")
        try:
            return parse_opening_keys(text)
        except InvalidKey as exc:
            raise InvalidConfiguration(
                f"invalid configuration: PAGOS_PAYMENT_TOKEN_OPEN_KEYS: {exc}") from exc

"""pedidos settings: the saga's deadlines (docs/standard.md#timeouts-of-each-service), validated
against the standard's minimums (docs/standard.md#configurable-limits).

The minimums are 30 s for a step and 1 h for a saga. The saga's own timeouts set 15 s for
the allocation step, which is one local transaction in inventario (lock timeout 10 s): we keep
15 s for it and allow it as the one exception (docs/adr/0001-allocation-step-timeout.md).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from saga_contracts.registry import superseding_types
from saga_contracts.sealing import InvalidKey, SealingKey, parse_sealing_key
from sagakit.settings import InvalidConfiguration, value_or_file
from sagakit.twins import versions_setting

log = logging.getLogger("pedidos.config")

MIN_STEP_S = 30.0
MIN_ALLOCATION_STEP_S = 15.0
MIN_SAGA_S = 3600.0
ORDEN_SOLICITADA_VERSIONS = tuple(superseding_types("OrdenSolicitada"))
# How long before inventario's reservation ends (StockVerificado's ``reserved_until``) the
# payment step that waits on it falls due at the latest: time for a PagoExitoso taken at the
# step's last moment to reach inventario and be allocated, and for the two databases' clocks
# to differ. A saga's payment step never outlives the units held for it.
RESERVATION_MARGIN_S = 30.0


class PedidosSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PEDIDOS_", extra="ignore")

    validation_timeout_s: float = Field(30.0, description=(
        "How long a saga waits for inventario's stock check before it is cancelled as timed "
        "out. At least 30 unless SAGA_ALLOW_UNSAFE_LIMITS is set."))
    payment_timeout_s: float = Field(60.0, description=(
        "How long a saga waits for the payment's outcome before it is cancelled as timed out. "
        "At least 30 unless SAGA_ALLOW_UNSAFE_LIMITS is set."))
    allocation_timeout_s: float = Field(15.0, description=(
        "How long a paid saga waits for its stock allocation before it is cancelled as timed "
        "out. At least 15 unless SAGA_ALLOW_UNSAFE_LIMITS is set."))
    saga_timeout_s: float = Field(7200.0, description=(
        "How long a saga may stay unfinished, compensation included; past it, it is marked "
        "TIMED_OUT. At least 3600 unless SAGA_ALLOW_UNSAFE_LIMITS is set."))
    # The longest the scanner sleeps. It wakes on its own when the earliest deadline falls due;
    # this bounds how late it sees a saga another instance started with a deadline shorter than
    # that (never, with the minimums: the shortest step timeout is 15 s).
    deadline_scan_interval_s: float = Field(5.0, gt=0, le=MIN_ALLOCATION_STEP_S, description=(
        "Longest the deadline scanner sleeps; it also wakes when the earliest deadline falls "
        "due."))
    order_rate_per_customer: float = Field(10.0, gt=0, description=(
        "Orders a second one customer may place, sustained (`POST /orders`; more get `429` "
        "with `Retry-After`). Counted per instance: N replicas behind a balancer let a "
        "customer place up to N times as many."))
    order_burst_per_customer: int = Field(50, ge=1, description=(
        "Orders one customer may place at once before `PEDIDOS_ORDER_RATE_PER_CUSTOMER` "
        "applies."))
    # Card testing: whoever holds a list of stolen card numbers places small orders to learn
    # which cards are live. The limits below count declined payments (each PagoRechazado heard,
    # whatever became of its order) in pedidos' database, so they hold across every instance.
    decline_window_s: float = Field(3600.0, gt=0, le=7 * 86400, description=(
        "How far back `POST /orders` counts a customer's and a card's declined payments "
        "(`PEDIDOS_DECLINES_PER_CUSTOMER`, `PEDIDOS_DECLINES_PER_CARD`)."))
    declines_per_customer: int = Field(10, ge=1, description=(
        "Declined payments one customer may have within `PEDIDOS_DECLINE_WINDOW_S`, its orders "
        "still waiting for their payment counted with them; past it `POST /orders` answers "
        "`429` with `Retry-After` (when the oldest decline leaves the window, or in a second "
        "while orders wait), whatever the card, in every instance."))
    declines_per_card: int = Field(5, ge=1, description=(
        "Declined payments one card (the payment token's keyed fingerprint, never the token) "
        "may have within `PEDIDOS_DECLINE_WINDOW_S`, its orders still waiting for their "
        "payment counted with them, whoever the customer; past it `POST /orders` with that "
        "card answers `429` with `Retry-After`, in every instance."))
    # The declines above are known only once pagos has told them: orders sent at once would all
    # be taken, and their cards tried, before any of their declines is heard. So an order still
    # waiting for its payment counts as a decline to come, and how many may wait at once is
    # capped as well (pedidos.usecases.decline_velocity).
    waiting_orders_per_customer: int = Field(5, ge=1, description=(
        "Orders one customer may have waiting for their payment at once (placed, their payment "
        "not decided yet); past it `POST /orders` answers `429` with `Retry-After`, in every "
        "instance. Waiting orders also count against `PEDIDOS_DECLINES_PER_CUSTOMER`, as "
        "declines to come."))
    waiting_orders_per_card: int = Field(3, ge=1, description=(
        "Orders one card may have waiting for their payment at once, whoever the customer; "
        "past it `POST /orders` with that card answers `429` with `Retry-After`, in every "
        "instance. Waiting orders also count against `PEDIDOS_DECLINES_PER_CARD`, as declines "
        "to come."))
    # A breaking change of OrdenSolicitada is a new event type, published beside the old one
    # while its consumers move (docs/operations.md#evolving-an-event-schema).
    publishes_orden_solicitada: str = Field("OrdenSolicitada", description=(
        "Which versions of the event that starts a saga pedidos publishes, comma-separated, "
        "each in the same commit: `OrdenSolicitada`, `OrdenSolicitada_v4` or both. A "
        "consumer handles a saga's once, whichever version it reads first."))
    allow_unsafe_limits: bool = Field(False, validation_alias="SAGA_ALLOW_UNSAFE_LIMITS",
                                      description=(
        "Lets the timeouts above go below their minimums, with a warning in the log; for tests "
        "and the benchmark only (the messaging settings read it too)."))

    @model_validator(mode="after")
    def _check(self) -> Self:
        checks = [
            ("PEDIDOS_VALIDATION_TIMEOUT_S", self.validation_timeout_s, MIN_STEP_S),
            ("PEDIDOS_PAYMENT_TIMEOUT_S", self.payment_timeout_s, MIN_STEP_S),
            ("PEDIDOS_ALLOCATION_TIMEOUT_S", self.allocation_timeout_s, MIN_ALLOCATION_STEP_S),
            ("PEDIDOS_SAGA_TIMEOUT_S", self.saga_timeout_s, MIN_SAGA_S),
        ]
        below = [(name, value, minimum) for name, value, minimum in checks if value < minimum]
        if below and not self.allow_unsafe_limits:
            raise ValueError("; ".join(f"{n}={v} is below the minimum {m}" for n, v, m in below))
        for name, value, minimum in below:
            log.warning("unsafe limit allowed by SAGA_ALLOW_UNSAFE_LIMITS: %s=%s (minimum %s)",
                        name, value, minimum)
        return self

    @field_validator("publishes_orden_solicitada")
    @classmethod
    def _known_versions(cls, value: str) -> str:
        return ",".join(versions_setting(value, ORDEN_SOLICITADA_VERSIONS))

    @property
    def orden_solicitada_versions(self) -> list[str]:
        """``PEDIDOS_PUBLISHES_ORDEN_SOLICITADA`` as a list, in its order."""
        return self.publishes_orden_solicitada.split(",")

    def step_timeout_s(self, step: str) -> float | None:
        return {"validacion": self.validation_timeout_s, "pago": self.payment_timeout_s,
                "asignacion": self.allocation_timeout_s}.get(step)


class PaymentTokenSealing(BaseSettings):
    """The key pedidos seals each order's payment token with, for pagos alone to open
    (``saga_contracts.sealing``). It is a public key: the private half is pagos'."""

    model_config = SettingsConfigDict(env_prefix="PEDIDOS_", extra="ignore")

    payment_token_seal_key: str | None = Field(None, description=(
        "The public key payment tokens are sealed with for pagos, as `<key id>:<base64 of the "
        "32-byte X25519 public key>`; its key id goes into every sealed token, and pagos must "
        "hold the private key of that id (key rotation: docs/operations.md). Required, here or "
        "in PEDIDOS_PAYMENT_TOKEN_SEAL_KEY_FILE."))
    payment_token_seal_key_file: Path | None = Field(None, description=(
        "A file holding PEDIDOS_PAYMENT_TOKEN_SEAL_KEY, read at start, instead of the variable "
        "(the local stack passes its generated key this way)."))

    def sealing_key(self) -> SealingKey:
        """The key, or the process stops with a message naming the variable."""
        text = value_or_file(self.payment_token_seal_key, self.payment_token_seal_key_file,
                             "PEDIDOS_PAYMENT_TOKEN_SEAL_KEY")
        try:
            return parse_sealing_key(text)
        except InvalidKey as exc:
            raise InvalidConfiguration(
                f"invalid configuration: PEDIDOS_PAYMENT_TOKEN_SEAL_KEY: {exc}") from exc


MIN_FINGERPRINT_KEY_BYTES = 32


class FingerprintKey(BaseSettings):
    """The secret pedidos keys its fingerprints with (``pedidos.usecases.fingerprints``): of an
    order's payment token (the decline limit per card) and of a request (its Idempotency-Key).
    Keyed, a fingerprint cannot be matched against a list of card tokens by whoever reads the
    database, as a bare hash of one could."""

    model_config = SettingsConfigDict(env_prefix="PEDIDOS_", extra="ignore")

    fingerprint_key: SecretStr | None = Field(None, description=(
        "The secret the fingerprints of payment tokens and of requests are keyed with (HMAC-"
        "SHA-256), at least 32 characters; the same in every instance. Changing it makes "
        "the decline limit per card start again and, for the idempotency window, a request "
        "sent again under its Idempotency-Key is refused as another body. Required, here or "
        "in PEDIDOS_FINGERPRINT_KEY_FILE; never logged."))
    fingerprint_key_file: Path | None = Field(None, description=(
        "A file holding PEDIDOS_FINGERPRINT_KEY, read at start, instead of the variable (the "
        "local stack passes the key it generated this way)."))

    def key(self) -> bytes:
        """The key, or the process stops with a message naming the variable (never the
        key)."""
        secret = self.fingerprint_key
        text = value_or_file(None if secret is None else secret.get_secret_value(),
                             self.fingerprint_key_file, "PEDIDOS_FINGERPRINT_KEY").strip()
        if len(text.encode()) < MIN_FINGERPRINT_KEY_BYTES:
            raise InvalidConfiguration(
                "invalid configuration: PEDIDOS_FINGERPRINT_KEY: shorter than "
                f"{MIN_FINGERPRINT_KEY_BYTES} characters")
        return text.encode()

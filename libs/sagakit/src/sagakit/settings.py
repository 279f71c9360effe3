"""Messaging limits from the environment, validated against the standard's minimums
(docs/standard.md#configurable-limits).

A value below a minimum stops the service with a message naming the variable. Tests and the
benchmark may go below the minimums only with SAGA_ALLOW_UNSAFE_LIMITS=1, which is logged.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Self, TypeVar

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from saga_contracts.replay_signature import OperatorKeys

log = logging.getLogger("sagakit.settings")

S = TypeVar("S", bound=BaseSettings)

# (field, minimum, env var) from docs/standard.md#configurable-limits and #relay.
STANDARD_MINIMUMS: list[tuple[str, float, str]] = [
    ("retry_max_attempts", 3, "SAGA_RETRY_MAX_ATTEMPTS"),
    ("retry_initial_backoff_s", 0.1, "SAGA_RETRY_INITIAL_BACKOFF_S"),
    ("retry_max_backoff_s", 30, "SAGA_RETRY_MAX_BACKOFF_S"),
]


class InvalidConfiguration(SystemExit):
    pass


SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL")
SASL_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")


class KafkaClientSettings(BaseSettings):
    """Where Kafka is and who a client is to it: read by every Kafka client of the project (the
    services' relay and consumer, the tests, sagactl, the benchmark, the local stack), turned
    into client arguments by ``sagakit.kafka.client_security``."""

    model_config = SettingsConfigDict(extra="ignore")

    kafka_bootstrap_servers: str = Field(
        "127.0.0.1:9092", validation_alias="KAFKA_BOOTSTRAP_SERVERS",
        description="Kafka brokers the client connects to first (host:port, comma-separated).")
    kafka_security_protocol: str = Field(
        "PLAINTEXT", validation_alias="KAFKA_SECURITY_PROTOCOL", description=(
        "How the client talks to Kafka: `PLAINTEXT` (no authentication), `SASL_PLAINTEXT` "
        "(SASL, no TLS), `SASL_SSL` (SASL over TLS) or `SSL`."))
    kafka_sasl_mechanism: str = Field(
        "SCRAM-SHA-512", validation_alias="KAFKA_SASL_MECHANISM", description=(
        "SASL mechanism with a `SASL_*` protocol: `SCRAM-SHA-512`, `SCRAM-SHA-256` or "
        "`PLAIN`."))
    kafka_sasl_username: str | None = Field(
        None, validation_alias="KAFKA_SASL_USERNAME", description=(
        "The client's Kafka principal (its user name) with a `SASL_*` protocol."))
    kafka_sasl_password: SecretStr | None = Field(
        None, validation_alias="KAFKA_SASL_PASSWORD", description=(
        "Password of `KAFKA_SASL_USERNAME`; never logged."))
    kafka_ssl_cafile: str | None = Field(
        None, validation_alias="KAFKA_SSL_CAFILE", description=(
        "PEM file of the CA that signed the broker's certificate, with `SASL_SSL` or `SSL`; "
        "unset: the system's CAs."))

    @field_validator("kafka_security_protocol", "kafka_sasl_mechanism", mode="before")
    @classmethod
    def _upper(cls, v: object) -> object:
        return v.strip().upper() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check_security(self) -> Self:
        if self.kafka_security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"KAFKA_SECURITY_PROTOCOL must be one of {', '.join(SECURITY_PROTOCOLS)}")
        if self.kafka_security_protocol.startswith("SASL_"):
            if self.kafka_sasl_mechanism not in SASL_MECHANISMS:
                raise ValueError(
                    f"KAFKA_SASL_MECHANISM must be one of {', '.join(SASL_MECHANISMS)}")
            if not self.kafka_sasl_username or self.kafka_sasl_password is None:
                raise ValueError(f"KAFKA_SECURITY_PROTOCOL={self.kafka_security_protocol} needs "
                                 "KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD")
        return self


class MessagingSettings(KafkaClientSettings):
    """Everything the outbox relay, the inbox and the consumer loop need."""

    model_config = SettingsConfigDict(env_prefix="SAGA_", extra="ignore")

    # Relay (docs/standard.md#relay: 100-500 ms, never above 1 s)
    relay_poll_interval_s: float = Field(0.5, gt=0, le=1.0, description=(
        "Longest the outbox relay goes without selecting from its table when no commit "
        "signals it; also how often a standby relay tries to take the lead."))
    relay_batch_size: int = Field(200, ge=1, le=5000, description=(
        "Most outbox rows the relay selects and publishes in one round; a full round is "
        "followed by the next at once."))
    relay_publish_timeout_s: float = Field(10.0, gt=0, description=(
        "How long the relay waits for Kafka to start its producer, acknowledge a batch or answer "
        "a metadata request; past it the batch is given up on, and after a backoff the relay waits "
        "for the sends still in flight before it sends their rows again or anything new."))
    # The lead's bounds (sagakit.outbox.leadership, ADR 0012): a leader that hangs or loses
    # PostgreSQL is replaced within the lease and a standby's poll; one that cannot get its rows
    # into Kafka gives the lead up after the stall. Both well inside the 15 s a saga step may
    # lose to a fault, the consumer group's 10 s session timeout included.
    relay_lease_s: float = Field(5.0, ge=1, le=60, description=(
        "How long the relay's lead lasts, by the database's clock, unless its holder renews it "
        "(four times as often); a leader that hangs or is cut off from PostgreSQL is replaced "
        "by a standby within this plus the standby's poll interval, and sends nothing to Kafka "
        "once it has gone this long without a renewal."))
    relay_stall_s: float = Field(6.0, ge=1, le=120, description=(
        "A leading relay that has finished no round of publishing for this long (Kafka "
        "unreachable or not acknowledging, or its loop stuck) gives the lead up to a standby "
        "and stands aside for three poll intervals before it tries again."))
    relay_max_attempts: int = Field(10, ge=1, description=(
        "Publishes of an outbox row that Kafka refused (or failed for it) before the row is "
        "marked failed for an operator, its saga's later rows held behind it; a broker that is "
        "unreachable does not count."))
    relay_backoff_cap_s: float = Field(5.0, gt=0, description=(
        "Longest wait of the relay after a database or broker failure; the wait starts at "
        "0.1 s and doubles with each failure in a row."))
    outbox_retention_days: float = Field(7.0, gt=0, description=(
        "Published outbox rows older than this are deleted by the cleanup job."))
    dead_letter_retention_days: float = Field(30.0, gt=0, description=(
        "Dead letters archived by an operator longer ago than this are deleted by the cleanup "
        "job (their audit records stay). Letters not archived are kept, whatever their age."))
    inbox_retention_days: float = Field(7.0, gt=0, description=(
        "Inbox rows of handled messages older than this are deleted by the cleanup job "
        "(dead-lettered ones after SAGA_INBOX_DEAD_LETTER_RETENTION_DAYS); a message "
        "redelivered later is no longer recognised as a duplicate by the inbox."))
    inbox_dead_letter_retention_days: float = Field(30.0, gt=0, description=(
        "Inbox rows of dead-lettered messages older than this are deleted by the cleanup job "
        "(`dlq_messages_total` then stops counting them; the letters stay in the DLQ topic "
        "for its own retention); a redelivery of such a message later is handled again."))
    cleanup_interval_s: float = Field(600.0, gt=0, description=(
        "How often the cleanup job deletes outbox and inbox rows past their retention."))
    cleanup_batch_size: int = Field(1000, ge=1, description=(
        "Rows the cleanup job deletes per transaction; it goes on until a batch comes out "
        "short."))

    # Consumer retries (docs/standard.md#failures-retries-and-dead-letters)
    retry_max_attempts: int = Field(5, description=(
        "Attempts at a message whose handler keeps failing transiently before it is "
        "dead-lettered. At least 3 unless SAGA_ALLOW_UNSAFE_LIMITS is set."))
    retry_initial_backoff_s: float = Field(0.5, description=(
        "Wait before the first retry of a message that failed transiently. At least 0.1 unless "
        "SAGA_ALLOW_UNSAFE_LIMITS is set."))
    retry_backoff_factor: float = Field(2.0, ge=1.0, description=(
        "Each further retry of a message waits this many times longer than the one before."))
    retry_max_backoff_s: float = Field(60.0, description=(
        "Longest wait before a retry of a message. At least 30 unless "
        "SAGA_ALLOW_UNSAFE_LIMITS is set."))
    retry_jitter: float = Field(0.2, ge=0.1, le=0.25, description=(
        "Random spread of every retry wait, as a fraction of it (0.2: ±20 %)."))

    # One attempt at a handler (its whole transaction) may take this long; past it the attempt is
    # abandoned and counted as a transient failure (docs/standard.md#failure-scenarios, the third).
    # Above the database lock and statement timeouts, below the shortest step timeout (30 s).
    handler_timeout_s: float = Field(20.0, gt=0, le=300, description=(
        "Longest one attempt at a handler (its whole transaction) may take; past it the "
        "attempt is abandoned and retried as a transient failure."))

    # The consumer's side of a database cut off from this instance only (sagakit.store.
    # reachability): the group gives its partitions to an instance that can reach it. With the
    # group's rebalance (a heartbeat, 3 s) and the backlog, inside the 15 s a saga step may lose.
    consumer_database_lost_s: float = Field(5.0, ge=1, le=60, description=(
        "How long this instance's database may leave a probe of it unanswered (one a second) "
        "before the instance's consumer leaves its group, so that its partitions go to an "
        "instance that can reach the database; it joins again once the database answers."))
    consumer_max_records: int = Field(500, ge=1, description=(
        "Most records one fetch from Kafka returns, and how many may wait in a partition's "
        "lane before that partition is paused."))
    # Records of one partition queued behind each other whose handlers allow it are handled in
    # one transaction, up to this many (sagakit.store.shared_transaction.SharedTransaction); 1
    # handles every record in a transaction of its own. Only records already waiting are
    # grouped: a record never waits for others to arrive.
    consumer_batch_max: int = Field(32, ge=1, le=500, description=(
        "Most records of one partition, already waiting, handled in one shared transaction "
        "when their handlers allow it; 1 gives every record a transaction of its own."))
    # A shared transaction waiting longer than this for a lock is rolled back and its records
    # handled one by one: two of them can wait for each other, and PostgreSQL's deadlock
    # detector only looks after a second.
    consumer_batch_lock_timeout_ms: int = Field(200, ge=1, le=10_000, description=(
        "Lock wait after which a shared transaction is rolled back and its records are "
        "handled one by one."))
    # How long the broker holds an empty fetch: what an idle consumer costs (requests per
    # second). It adds nothing to a record's latency: every partition stays in the fetch in
    # flight, which the broker answers as soon as any of them gets a record. Only a partition
    # paused (a full lane, a record waiting for its retry) may wait this long to be fetched
    # again after it resumes, on a quiet stack. 500 -> 1000 ms: idle stack 5.2 -> 4.5 % of a core.
    consumer_fetch_max_wait_ms: int = Field(1000, ge=1, le=5000, description=(
        "How long Kafka holds a fetch that found no records: sets what an idle consumer costs, "
        "not a record's latency."))
    # Offsets are recorded after each record's local commit and sent to Kafka by one request
    # per consumer at most this often. Each is a write to __consumer_offsets: at 100 ms, three
    # consumers sent 30 a second whenever records flowed (1.5 a saga at 20 sagas/s); at 1 s, 3.
    # A crash redelivers what was handled since the last one, which the inbox absorbs; a
    # consumer that stops cleanly sends its offsets first. 100 -> 1000 ms at 20 orders/s:
    # Kafka 10.8-11.2 -> 8.9-9.9 ms of CPU a saga.
    consumer_offset_commit_interval_ms: int = Field(1000, ge=10, le=5000, description=(
        "How often a consumer sends the offsets of the records it handled to Kafka; a crash "
        "redelivers what was handled since, which the inbox absorbs."))
    # Who may address a replay to one service (sagakit.consumer.replays): parsed here too, so
    # that a key that cannot be read stops the service at its start, naming the variable.
    operator_public_keys: str | None = Field(None, description=(
        "The operator's replay-signing public keys, comma-separated `<key id>:<base64 key>` "
        "(`sagactl signing-key` prints its key's); several while a key is being replaced. A "
        "record addressed with `X-Replay-For` to another service is skipped, and a service "
        "takes a record for a replay, only when one of them signed it. Required where a "
        "consumer runs: a service refuses to start its consumer without one."))

    allow_unsafe_limits: bool = Field(False, description=(
        "Lets the retry settings go below the standard's minimums, with a warning in the log; "
        "for tests and the benchmark only (pedidos' deadlines read it too)."))

    plugins: str | None = Field(None, description=(
        "Test suites only: comma-separated modules that wrap the consumer's delivery and the "
        "relay's acknowledgements (`sagakit.plugins`), as the fault plugin of the crash and "
        "chaos tests does; unset in production, whose images hold no plugin."))

    @field_validator("operator_public_keys")
    @classmethod
    def _readable_keys(cls, text: str | None) -> str | None:
        OperatorKeys.parse(text)  # InvalidKey is a ValueError: the variable is named
        return text

    @model_validator(mode="after")
    def _check_minimums(self) -> Self:
        below = [(env, getattr(self, name), minimum) for name, minimum, env in STANDARD_MINIMUMS
                 if getattr(self, name) < minimum]
        if below and not self.allow_unsafe_limits:
            detail = ", ".join(f"{env}={value} is below the standard's minimum {minimum}"
                               for env, value, minimum in below)
            raise ValueError(f"invalid configuration: {detail} "
                             "(set SAGA_ALLOW_UNSAFE_LIMITS=1 only in tests)")
        for env, value, minimum in below:
            log.warning("unsafe limit allowed by SAGA_ALLOW_UNSAFE_LIMITS: %s=%s (minimum %s)",
                        env, value, minimum)
        return self


def load(cls: type[S]) -> S:
    """Builds settings or stops the process with a message that names the bad variable."""
    from pydantic import ValidationError

    try:
        return cls()
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            prefix = cls.model_config.get("env_prefix", "")
            name = f"{prefix}{loc}".upper() if loc else "(settings)"
            lines.append(f"  {name}: {err['msg']}")
        raise InvalidConfiguration("invalid configuration:\n" + "\n".join(lines)) from exc


def value_or_file(value: str | None, path: Path | None, variable: str) -> str:
    """A setting given either as ``variable`` itself or as ``<variable>_FILE``, the path of a
    file that holds it (a key or a secret kept out of the environment, where any process of
    the same user may read it): exactly one of the two. Stops the process with a message that
    names the variables, and never quotes the value."""
    if value is not None and path is not None:
        raise InvalidConfiguration(f"invalid configuration: {variable} and {variable}_FILE are "
                                   "both set; give one")
    if path is not None:
        try:
            return path.read_text().strip()
        except OSError as exc:
            raise InvalidConfiguration(f"invalid configuration: {variable}_FILE: cannot read "
                                       f"{path} ({exc.strerror})") from exc
    if value is None or not value.strip():
        raise InvalidConfiguration(f"invalid configuration: {variable} (or {variable}_FILE) "
                                   "is not set")
    return value.strip()

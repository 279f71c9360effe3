"""Prometheus metrics: the standard's five (docs/standard.md#metrics) plus what operating the
plumbing needs.

A service's own metrics (a payment gateway's latency, the events it ignored and why) are its
own module's, created at zero by its ``ServiceDefinition.metrics_at_zero``; one that two
services declare under one name is declared with ``shared_counter``.

Label names are the standard's, in English: saga_type (tipo_de_saga), final_status
(estado_final), service (nombre_servicio), event_type (tipo_evento), error_type (tipo_error),
reason (razón_compensación).
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import Counter, Gauge, Histogram

from saga_contracts import registry
from saga_contracts.replay_signature import Forgery

# ---- mandated (docs/standard.md#metrics)
SAGA_DURATION = Histogram(
    "saga_duration_seconds", "Time from the start of a saga to its conclusion",
    ["saga_type", "final_status"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600, 7200),
)
STEP_ERRORS = Counter(
    "saga_step_errors_total", "Failures while processing saga events",
    ["service", "event_type", "error_type"],
)
COMPENSATIONS = Counter(
    "saga_compensations_total", "Compensating transactions executed",
    ["service", "reason"],
)
OUTBOX_PENDING = Gauge(
    "outbox_pending_messages", "Outbox rows waiting to be published", ["service"],
)
DLQ_MESSAGES = Gauge(
    "dlq_messages_total", "Messages this service has sent to its dead-letter topic",
    ["service", "event_type"],
)

# ---- operations
DEAD_LETTERS_OPEN = Gauge(
    "saga_dead_letters_open",
    "Dead letters of this service no operator has acted on yet (neither replayed, archived nor "
    "found forged): the state 'open' of <service>_read.dead_letters_v1. It goes down as they "
    "are handled, unlike dlq_messages_total",
    ["service"],
)
OUTBOX_OLDEST_AGE = Gauge(
    "outbox_oldest_pending_age_seconds", "Age of the oldest unpublished outbox row", ["service"],
)
OUTBOX_FAILED = Gauge(
    "outbox_failed_messages", "Outbox rows the relay gave up on", ["service"],
)
RELAY_PUBLISHED = Counter(
    "outbox_published_total", "Outbox rows published and acknowledged by Kafka", ["service"],
)
RELAY_PUBLISH_ERRORS = Counter(
    "outbox_publish_errors_total", "Failed publish attempts of the relay", ["service", "error_type"],
)
RELAY_LEADER = Gauge(
    "outbox_relay_leader", "1 on the instance whose relay publishes the service's outbox",
    ["service"],
)
DATABASE_REACHABLE = Gauge(
    "saga_database_reachable",
    "0 while this instance's database has not answered its probe for "
    "SAGA_CONSUMER_DATABASE_LOST_S (its consumer has left its group meanwhile), else 1",
    ["service"],
)
RELAY_LEAD_LOST = Counter(
    "outbox_relay_lead_lost_total",
    "Leads this instance's relay lost or gave up, by reason: expired (not renewed in time: "
    "the relay hung or lost PostgreSQL), taken (another relay holds the lease), stalled (no "
    "round of publishing finished: Kafka unreachable), connection (its connection failed)",
    ["service", "reason"],
)
RELAY_LEAD_LOST_REASONS = ("expired", "taken", "stalled", "connection")
RELAY_WAKEUPS_FORWARDED = Counter(
    "outbox_relay_wakeups_forwarded_total",
    "NOTIFYs a standby relay sent to wake the leader for commits of its process", ["service"],
)
RELAY_COMMIT_TO_ACK = Histogram(
    "outbox_commit_to_ack_seconds", "From the outbox row's creation to Kafka's acknowledgement",
    ["service"], buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30),
)
MESSAGES_CONSUMED = Counter(
    "saga_messages_consumed_total", "Messages handled by the consumer loop, by outcome",
    ["service", "event_type", "outcome"],
)
HANDLER_DURATION = Histogram(
    "saga_handler_duration_seconds", "Time to handle one message, commit included",
    ["service", "event_type"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30),
)
SHARED_TRANSACTIONS = Counter(
    "saga_shared_transactions_total",
    "Transactions the consumer shared between several records, by how they ended",
    ["service", "outcome"],
)
SHARED_TRANSACTION_RECORDS = Histogram(
    "saga_shared_transaction_records", "Records committed by one shared transaction",
    ["service"], buckets=(2, 4, 8, 16, 32, 64),
)
CONSUMER_LAG = Gauge(
    "kafka_consumer_lag", "Messages between the committed offset and the end of the partition",
    ["service", "topic", "partition"],
)
STEP_TIMEOUTS = Counter(
    "saga_step_timeouts_total", "Steps whose deadline passed", ["service", "step"],
)
SAGAS_STARTED = Counter("sagas_started_total", "Sagas started", ["saga_type"])
SAGAS_FINISHED = Counter("sagas_finished_total", "Sagas that reached a terminal state",
                         ["saga_type", "status"])
ALERTS = Counter(
    "saga_alerts_total", "Operational alerts raised by a service (critical refunds, expiries)",
    ["service", "alert", "severity"],
)
FORGED_REPLAYS = Counter(
    "saga_forged_replays_total",
    "Records addressed with X-Replay-For that the operator did not sign, handled as any "
    "record; and dead letters a replay tool found not to match the broker "
    "(reason dead_letter_mismatch)",
    ["service", "reason"],
)
SCHEMA_FETCHES = Counter(
    "saga_schema_registry_fetches_total",
    "Schema versions this service asked the schema registry for, by when (start: warming its "
    "cache; miss: a version a record brought that the cache lacked) and outcome (found, "
    "missing: the registry does not hold it, unavailable: no answer or not its API's). After "
    "the start, only cache misses reach the registry",
    ["service", "when", "outcome"],
)
SCHEMA_REGISTRY_REACHABLE = Gauge(
    "saga_schema_registry_reachable",
    "1 when the schema registry answered this instance's last question (which versions are "
    "deprecated, every SAGA_SCHEMA_DEPRECATIONS_INTERVAL_S), 0 when it did not: no answer, "
    "or not its API's. Absent without SCHEMA_REGISTRY_URL",
    ["service"],
)
SCHEMA_MISMATCHES = Counter(
    "saga_schema_registry_mismatches_total",
    "Schema versions the registry holds with another content than the contracts' package's "
    "of the same version; the registry's is used",
    ["service", "event_type", "version"],
)
SAGA_DEADLINE_USED = Gauge(
    "saga_deadline_used_ratio",
    "Largest fraction of its overall deadline used by an active saga (1.0 = expired)",
    ["saga_type"],
)
SAGAS_ACTIVE = Gauge("sagas_active", "Sagas not yet in a terminal state", ["saga_type"])

HTTP_REQUESTS = Counter(
    "http_requests_total",
    "HTTP requests a service's app answered, by the route's template (never the raw path) and "
    "status; /health, /ready and /metrics aside",
    ["service", "method", "route", "status"],
)
HTTP_REQUEST_DURATION = Histogram(
    "http_request_duration_seconds", "Time to answer an HTTP request, by the route's template",
    ["service", "method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

OTHER_EVENT_TYPE = "other"
"""The ``event_type`` label of every event type the contracts do not define."""


def event_type_label(event_type: str | None) -> str:
    """``event_type`` as a label value: one the contracts define, else ``other``. The value
    comes from a record's header, which any producer writes; taken as it came, each new
    value would be a new series in every metric that carries it, without bound."""
    if event_type is not None and event_type in registry.all_schemas():
        return event_type
    return OTHER_EVENT_TYPE

FINAL_STATUSES = ("success", "failed", "compensated")
ERROR_TYPES = ("transient", "permanent")

_SHARED: dict[str, Counter] = {}


def shared_counter(name: str, documentation: str, labelnames: Sequence[str]) -> Counter:
    """A counter several services declare under one name (each in its own metrics module):
    the first declaration in the process registers it, the next ones get the same counter, as
    a process that imports several services (the unit tests) needs; prometheus_client would
    refuse a second registration of the name."""
    counter = _SHARED.get(name)
    if counter is None:
        counter = _SHARED[name] = Counter(name, documentation, list(labelnames))
    elif tuple(counter._labelnames) != tuple(labelnames):
        raise ValueError(f"{name} is declared with the labels {counter._labelnames}, "
                         f"not {tuple(labelnames)}")
    return counter


def initialise(service: str, handled_event_types: Sequence[str],
               saga_types: Sequence[str]) -> None:
    """Creates every series of the plumbing at zero, so that each service exposes the
    standard's metrics from its start and ``rate()`` sees the first increment (docs/standard.md#metrics).
    The service's own (its compensations' reasons among them) are created by its
    ``ServiceDefinition.metrics_at_zero``."""
    for saga_type in saga_types:
        for status in FINAL_STATUSES:
            SAGA_DURATION.labels(saga_type, status)
    for event_type in handled_event_types:
        for error_type in ERROR_TYPES:
            STEP_ERRORS.labels(service, event_type, error_type)
        DLQ_MESSAGES.labels(service, event_type)
    for forgery in Forgery:
        FORGED_REPLAYS.labels(service, forgery.value)
    # sagakit.operations.dead_letter_actions.FORGED_REASON (it imports this module).
    FORGED_REPLAYS.labels(service, "dead_letter_mismatch")
    OUTBOX_PENDING.labels(service)
    DEAD_LETTERS_OPEN.labels(service)
    for reason in RELAY_LEAD_LOST_REASONS:
        RELAY_LEAD_LOST.labels(service, reason)
    for outcome in ("committed", "rolled_back"):
        SHARED_TRANSACTIONS.labels(service, outcome)

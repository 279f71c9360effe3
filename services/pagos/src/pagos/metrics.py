"""pagos' own Prometheus series, beside the plumbing's (``sagakit.observability.metrics``),
created at zero by ``initialise`` (its ``ServiceDefinition.metrics_at_zero``)."""

from __future__ import annotations

from enum import StrEnum

from prometheus_client import Counter, Gauge, Histogram

from pagos.domain.payment import Refusal
from sagakit.observability import metrics

GATEWAY_LATENCY = Histogram(
    "payment_gateway_request_duration_seconds", "Calls to the payment gateway",
    ["operation", "outcome"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

SEALED_TOKEN_MISMATCHES = Counter(
    "saga_sealed_token_mismatch_total",
    "Sealed payment tokens that were not sealed for the charge that carried them (a copy in a "
    "forged or changed event, or a key reused under its id): nothing was charged",
    ["service"],
)

COMPENSATION_REASON = "refund"
"""The one reason pagos counts its compensations under (``saga_compensations_total``)."""

REFUNDS_REFUSED = Counter(
    "saga_refund_refused_total",
    "Compensations pagos refused to act on: the saga's stock was allocated, or the event names "
    "another order than the payment's",
    ["service", "reason"],
)


class GatewayCall(StrEnum):
    CHARGE = "charge"
    REFUND = "refund"


class Stage(StrEnum):
    """Where pagos failed around a gateway call (not the gateway's answer)."""

    CALL = "call"              # making the call, or reading its reply: recorded as unknown
    RECORD = "record"          # recording its outcome: recorded as unknown instead
    UNRECORDED = "unrecorded"  # not even that: the call is made again when its lease runs out


GATEWAY_UNINTELLIGIBLE_REPLIES = Counter(
    "saga_gateway_unintelligible_reply_total",
    "Gateway replies pagos could not understand (a 200 whose body is not the API's: not JSON, "
    "or without the charge's or refund's id), each recorded as an unknown outcome",
    ["service", "call"],
)

GATEWAY_WORKER_ERRORS = Counter(
    "saga_gateway_worker_errors_total",
    "Exceptions pagos met around a gateway call, by stage: 'call' and 'record' are recorded as "
    "the call's unknown outcome (counted against its attempts); 'unrecorded' could not be "
    "recorded at all, and the call is made again when its lease runs out",
    ["service", "call", "stage"],
)


PAYMENTS_NEEDING_A_PERSON = Gauge(
    "saga_payments_needing_action",
    "Payments marked for a manual refund (REFUND_FAILED) that no operator has resolved yet "
    "(POST /payments/{payment_id}/resolution), as pagos_read.payments_needing_action_v1 "
    "lists them",
    ["service"],
)


def initialise(service: str) -> None:
    """Every label at zero from the start: an alert on increase() misses a series whose first
    sample is 1."""
    metrics.COMPENSATIONS.labels(service, COMPENSATION_REASON)
    SEALED_TOKEN_MISMATCHES.labels(service)
    for reason in Refusal:
        REFUNDS_REFUSED.labels(service, reason.value)
    for call in GatewayCall:
        GATEWAY_UNINTELLIGIBLE_REPLIES.labels(service, call.value)
        for stage in Stage:
            GATEWAY_WORKER_ERRORS.labels(service, call.value, stage.value)

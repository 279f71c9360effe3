"""Kafka header names. The three X- headers are the standard's (docs/standard.md#saga-and-span-ids)."""

SAGA_ID = "X-Saga-ID"
SPAN_ID = "X-Span-ID"
PARENT_SPAN_ID = "X-Parent-Span-ID"
MESSAGE_ID = "X-Message-ID"
EVENT_TYPE = "X-Event-Type"
SCHEMA_VERSION = "X-Schema-Version"
SOURCE_SERVICE = "X-Source-Service"
TRACEPARENT = "traceparent"
# W3C Trace Context's vendor state, carried with traceparent when the trace has one.
TRACESTATE = "tracestate"

# Dead-letter messages carry these on top of the original headers.
DLQ_ORIGINAL_TOPIC = "X-DLQ-Original-Topic"
DLQ_ORIGINAL_PARTITION = "X-DLQ-Original-Partition"
DLQ_ORIGINAL_OFFSET = "X-DLQ-Original-Offset"
DLQ_ATTEMPTS = "X-DLQ-Attempts"
DLQ_ERROR_CLASS = "X-DLQ-Error-Class"
# A replayed dead letter gets a new message id and points back at the one it replays.
REPLAY_OF = "X-Replay-Of"
# ...and is addressed to the one consumer that dead-lettered it; the others skip it, when the
# operator signed it (``saga_contracts.replay_signature``: "<key id>:<base64 signature>").
REPLAY_FOR = "X-Replay-For"
REPLAY_SIGNATURE = "X-Replay-Signature"
